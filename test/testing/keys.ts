import { KeyStore } from '../../src/keys/key-store.js';
import { defaultLedgerConfig } from '../../src/ledger/ledger.js';
import { openLedger } from '../../src/ledger/open-ledger.js';

/**
 * Makes a key for `tenant` in the ledger an orchestrator started with `--data-dir dataDir`
 * (and `--ledger ledger`, when given) will use, as `planrun keys create` does; answers the key.
 */
export async function createKey(dataDir: string, tenant: string, ledger?: string): Promise<string> {
  const opened = await openLedger(ledger, dataDir, defaultLedgerConfig);
  try {
    return (await new KeyStore(opened).create(tenant)).key;
  } finally {
    await opened.close();
  }
}
