#!/usr/bin/env node
import { Command } from 'commander';
import { join } from 'node:path';
import { openSqliteLedger } from '../ledger/sqlite/sqlite-ledger.js';
import { LedgerError } from '../ledger/errors.js';
import { version } from '../version.js';

const program = new Command();
program.name('planrun').description('Long jobs over an at-least-once queue, each with an exactly-once effect.').version(version);

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

try {
  await program.parseAsync();
} catch (error) {
  if (error instanceof LedgerError) {
    console.error(`planrun: ${error.message}`);
    process.exit(2);
  }
  throw error;
}
