import { join } from 'node:path';
import type { Command } from 'commander';
import { openSqliteLedger } from '../../ledger/sqlite/sqlite-ledger.js';

export function registerLedgerCommand(program: Command): void {
  const ledger = program.command('ledger').description('inspect the ledger');
  ledger
    .command('stats')
    .description('open the ledger (applying any pending migration) and print jobs by state and the outbox backlog')
    .option('--data-dir <dir>', 'where the SQLite ledger lives', './.planrun')
    .action(async (options: { dataDir: string }) => {
      const opened = await openSqliteLedger({ path: join(options.dataDir, 'ledger.db') });
      try {
        const counts = await opened.countJobsByState();
        const outbox = await opened.outboxStats();
        console.log(JSON.stringify({ jobs: counts, outbox }, null, 2));
      } finally {
        await opened.close();
      }
    });
}
