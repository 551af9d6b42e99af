import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from './options.js';

/**
 * Commands that only read what an orchestrator keeps (`ledger stats`, `keys list`,
 * `keys revoke`) refuse a data dir without it rather than create an empty one and answer
 * from that.
 */
export function requireData(dataDir: string, file: string): void {
  if (!existsSync(join(dataDir, file))) throw new UsageError(`no planrun data in ${dataDir} (use --data-dir)`);
}
