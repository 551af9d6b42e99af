/**
 * Test helpers for the PostgreSQL ledger: every ledger a test opens lives in a schema of
 * its own with a random name, dropped when the ledger closes, so tests do not see each
 * other and can run while other test runs use the same database.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

import { postgresUrl } from '../../testing/services.js';
import type { Ledger } from '../../../src/ledger/ledger.js';
import type { LedgerFactory } from '../testing.js';
import { openPostgresLedger, type PostgresLedgerOptions } from '../../../src/ledger/postgres/postgres-ledger.js';

export { postgresUrl };

/**
 * The test database, with commits that do not wait for their WAL flush: the suites test
 * what the ledger answers, which a crash-durability setting does not change, and a
 * conformance run commits thousands of times on a machine other test runs share.
 */
export function fastTestUrl(): string {
  const url = new URL(postgresUrl);
  url.searchParams.set('options', '-c synchronous_commit=off');
  return url.toString();
}

export function freshSchemaName(): string {
  return `planrun_test_${randomBytes(6).toString('hex')}`;
}

/** One admin connection pool per test file, for dropping schemas and poking at tables. */
export class TestSchemas {
  readonly admin = new pg.Pool({ connectionString: fastTestUrl(), max: 2 });
  private readonly created = new Set<string>();
  private readonly dropping = new Set<Promise<void>>();

  constructor() {
    this.admin.on('error', () => {});
  }

  /** A schema name that `dropAll` will remove. */
  reserve(): string {
    const schema = freshSchemaName();
    this.created.add(schema);
    return schema;
  }

  async drop(schema: string): Promise<void> {
    await this.admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    this.created.delete(schema);
  }

  /** Opens a ledger in a fresh schema; closing the ledger drops the schema. */
  async open(options: Omit<PostgresLedgerOptions, 'connectionString' | 'schema'> = {}): Promise<Ledger> {
    const schema = this.reserve();
    const ledger = await openPostgresLedger({ connectionString: fastTestUrl(), schema, ...options });
    return this.dropOnClose(ledger, schema);
  }

  /**
   * Closing the ledger ends its pool, then drops its schema in the background while the
   * next test runs (DDL is most of a test's cost here); `dropAll` waits for every drop.
   */
  dropOnClose(ledger: Ledger, schema: string): Ledger {
    const close = ledger.close.bind(ledger);
    let closed: Promise<void> | undefined;
    ledger.close = () =>
      (closed ??= close().then(() => {
        // A drop that fails leaves the schema reserved, and dropAll tries again.
        const drop = this.drop(schema).catch(() => {});
        this.dropping.add(drop);
        void drop.finally(() => this.dropping.delete(drop));
      }));
    return ledger;
  }

  factory: LedgerFactory = ({ clock, config }) => this.open(config === undefined ? { clock } : { clock, config });

  /** Drops whatever a failed test left behind and closes the admin pool. */
  async dropAll(): Promise<void> {
    await Promise.all(this.dropping);
    for (const schema of [...this.created]) await this.drop(schema);
    await this.admin.end();
  }
}
