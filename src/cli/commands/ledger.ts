import type { Command } from 'commander';
import { openExistingLedger } from '../existing-ledger.js';
import { ledgerChoice } from '../options.js';

interface StatsFlags {
  dataDir: string;
  ledger?: string;
}

export function registerLedgerCommand(program: Command): void {
  const ledger = program.command('ledger').description('inspect the ledger');
  ledger
    .command('stats')
    .description('open the ledger (applying any pending migration) and print jobs by state and the outbox backlog, as JSON')
    .option('--ledger <sqlite|url>', 'the ledger: sqlite (in the data dir) or a postgres:// URL (or PLANRUN_LEDGER)')
    .option('--data-dir <dir>', 'where the SQLite ledger lives', './.planrun')
    .action(async (flags: StatsFlags) => {
      const opened = await openExistingLedger(ledgerChoice(flags.ledger).ledger, flags.dataDir);
      try {
        const counts = await opened.countJobsByState();
        const outbox = await opened.outboxStats();
        console.log(JSON.stringify({ jobs: counts, outbox }, null, 2));
      } finally {
        await opened.close();
      }
    });
}
