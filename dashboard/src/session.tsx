/**
 * The signed-in key, kept in sessionStorage: it lasts while the tab is open and goes with it.
 */
import { createContext, useCallback, useContext, useMemo, useState, type ReactNode } from 'react';
import type { KeyKind } from './api.js';

const storageKey = 'planrun.dashboard.session';

export interface Session {
  key: string;
  kind: KeyKind;
}

interface SessionContextValue {
  session: Session | undefined;
  signIn: (session: Session) => void;
  signOut: () => void;
}

const SessionContext = createContext<SessionContextValue | undefined>(undefined);

function stored(): Session | undefined {
  const text = sessionStorage.getItem(storageKey);
  return text === null ? undefined : (JSON.parse(text) as Session);
}

export function SessionProvider({ children }: { children: ReactNode }) {
  const [session, setSession] = useState(stored);
  const signIn = useCallback((next: Session) => {
    sessionStorage.setItem(storageKey, JSON.stringify(next));
    setSession(next);
  }, []);
  const signOut = useCallback(() => {
    sessionStorage.removeItem(storageKey);
    setSession(undefined);
  }, []);
  const value = useMemo(() => ({ session, signIn, signOut }), [session, signIn, signOut]);
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}

export function useSessionContext(): SessionContextValue {
  const value = useContext(SessionContext);
  if (!value) throw new Error('useSessionContext outside SessionProvider');
  return value;
}

/** The signed-in session, on pages that are shown only when signed in. */
export function useSession(): Session {
  const { session } = useSessionContext();
  if (!session) throw new Error('useSession on a page shown without a session');
  return session;
}
