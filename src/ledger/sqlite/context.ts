import type { Statement } from 'better-sqlite3';
import type { Clock } from '../../core/clock.js';
import type { LedgerConfig } from '../ledger.js';
import type { SqliteDatabase } from './database.js';

/** What every operation needs: the database, the clock, the timing config, prepared statements. */
export class SqliteContext {
  private readonly statements = new Map<string, Statement>();

  constructor(
    readonly db: SqliteDatabase,
    readonly clock: Clock,
    readonly config: LedgerConfig,
  ) {}

  /** A prepared statement, compiled once per SQL text and reused. */
  sql(text: string): Statement {
    let statement = this.statements.get(text);
    if (!statement) {
      statement = this.db.prepare(text);
      this.statements.set(text, statement);
    }
    return statement;
  }
}
