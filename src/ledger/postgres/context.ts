import { createHash } from 'node:crypto';
import type pg from 'pg';

import type { Clock } from '../../core/clock.js';
import type { LedgerConfig } from '../ledger.js';

/** A connection in a transaction (writes) or the pool itself (single-statement reads). */
export type Queryable = Pick<pg.PoolClient, 'query'>;

const names = new Map<string, string>();

/** Each SQL text runs as a named prepared statement: parsed once per connection, then reused. */
function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `planrun_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
    names.set(text, name);
  }
  return name;
}

/** What every operation needs: where to run its SQL, the clock, the timing config. */
export class PgContext {
  constructor(
    readonly db: Queryable,
    readonly clock: Clock,
    readonly config: LedgerConfig,
  ) {}

  async rows<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    return (await this.db.query<R>({ name: statementName(text), text, values })).rows;
  }

  async row<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R | undefined> {
    return (await this.rows<R>(text, values))[0];
  }

  /** Runs a statement and answers how many rows it changed. */
  async run(text: string, values: unknown[] = []): Promise<number> {
    return (await this.db.query({ name: statementName(text), text, values })).rowCount ?? 0;
  }
}
