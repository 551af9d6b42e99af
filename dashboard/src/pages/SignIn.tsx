/** Sign-in with an API key: a tenant's key shows that tenant's jobs, an admin key every tenant's. */
import { useState, type FormEvent } from 'react';
import { ApiFailure, identifyKey } from '../api.js';
import { useSessionContext } from '../session.js';

export function SignIn({ reason }: { reason?: string }) {
  const { signIn } = useSessionContext();
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | undefined>(reason);
  const [checking, setChecking] = useState(false);

  async function submit(event: FormEvent) {
    event.preventDefault();
    setChecking(true);
    setError(undefined);
    try {
      signIn({ key: key.trim(), kind: await identifyKey(key.trim()) });
    } catch (failure) {
      setError(
        failure instanceof ApiFailure && failure.kind === 'unauthorized'
          ? `The orchestrator refused this key: ${failure.message}. Use the key \`planrun up\` printed, or one from \`planrun keys create\`.`
          : failure instanceof Error
            ? failure.message
            : String(failure),
      );
    } finally {
      setChecking(false);
    }
  }

  return (
    <form className="sign-in" onSubmit={(e) => void submit(e)}>
      <h1>planrun</h1>
      <label>
        API key
        <input name="key" type="password" autoComplete="off" value={key} onChange={(e) => setKey(e.target.value)} autoFocus />
      </label>
      <button type="submit" disabled={checking || key.trim() === ''}>
        Sign in
      </button>
      {error && (
        <div className="notice error" role="alert">
          {error}
        </div>
      )}
      <p className="muted">
        Use the key <code>planrun up</code> printed (also in <code>.planrun/local-key</code>), a tenant key from <code>planrun keys create</code>, or an admin
        key to see every tenant. It is kept in this tab only.
      </p>
    </form>
  );
}
