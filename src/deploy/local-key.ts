import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KeyStore } from '../keys/key-store.js';

/** The file in the data dir where `planrun up` keeps the local tenant's key for the client commands. */
export const localKeyFile = 'local-key';

/** The file in the data dir where `planrun up` writes the URL of its API, for the client commands. */
export const localUrlFile = 'local-url';

/** The tenant of jobs submitted with the local key. */
export const localTenant = 'local';

/**
 * The key the client commands use by default on this machine: the saved one while it
 * still works, else a new key for the `local` tenant, saved readable by this user only.
 */
export async function ensureLocalKey(keys: KeyStore, dataDir: string): Promise<string> {
  const file = join(dataDir, localKeyFile);
  let saved = '';
  try {
    saved = readFileSync(file, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  if (saved && (await keys.tenantOf(saved)) !== undefined) return saved;
  const key = (await keys.create(localTenant)).key;
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return key;
}

/** Saves where this machine's `planrun up` serves its API, so the client commands find it on any port. */
export function saveLocalUrl(dataDir: string, url: string): void {
  writeFileSync(join(dataDir, localUrlFile), `${url}\n`);
}
