/**
 * How a ledger operation is written once for every driver.
 *
 * An operation is a generator, a *plan*: it reads its parameters, the ledger's time and
 * timing config (`OperationEnv`), and the answers of the named statements it asks for
 * (`LedgerStatements`, statements.ts), and decides everything else itself: which row to
 * read, which edge of the state machine to take, which guarded UPDATE to run, what to
 * write to the attempt history and the outbox, and what to answer. It never touches a
 * database: it yields one `Step` (a statement's name and parameters) at a time and is
 * resumed with that statement's answer.
 *
 *     const job = yield* run('lockJob', { jobId });
 *
 * Each driver supplies the statements in its own SQL dialect and runs plans its own way:
 *   - SQLite (better-sqlite3, synchronous): `runPlan` answers every step at once, so a
 *     plan runs start to end inside the write's SAVEPOINT of the group commit, without
 *     ever leaving the synchronous body (group-commit.ts relies on it);
 *   - PostgreSQL (pg, asynchronous): `runPlanAsync` awaits each step on the connection
 *     of the write's transaction.
 * A plan is started fresh for every run of its body (a retried transaction, a group
 * commit batch run again alone), so it must not be shared between runs; it holds no
 * state outside itself. planned-ledger.ts maps each Ledger method to its plan, as a
 * write or a read; a driver only says how it runs either.
 */
import type { LedgerConfig } from '../ledger.js';
import type { LedgerStatements } from './statements.js';

export type StatementName = keyof LedgerStatements;
export type StatementParams<K extends StatementName> = Parameters<LedgerStatements[K]>[0];
export type StatementResult<K extends StatementName> = ReturnType<LedgerStatements[K]>;

/** One statement a plan asks its driver to run. */
export type Step = { [K in StatementName]: { readonly name: K; readonly params: StatementParams<K> } }[StatementName];

/** An operation written once: yields statements, returns the operation's answer. */
export type Plan<R> = Generator<Step, R, unknown>;

/** The same statements, as a driver whose every statement is a round trip supplies them. */
export type AsyncLedgerStatements = {
  [K in StatementName]: (params: StatementParams<K>) => Promise<StatementResult<K>>;
};

/** What a plan knows besides its parameters: the ledger's time, read once per run, and its timing. */
export interface OperationEnv {
  readonly now: number;
  readonly config: LedgerConfig;
}

/** Asks for statement `name`; `yield*` it to get the statement's answer, typed. */
export function* run<K extends StatementName>(name: K, params: StatementParams<K>): Generator<Step, StatementResult<K>, unknown> {
  return (yield { name, params } as Step) as StatementResult<K>;
}

type AnyStatement = (this: unknown, params: unknown) => unknown;

/** Runs `plan` to its end on a synchronous driver: every step is answered before the next. */
export function runPlan<R>(plan: Plan<R>, statements: LedgerStatements): R {
  let next = plan.next();
  while (!next.done) {
    const step = next.value;
    next = plan.next((statements[step.name] as AnyStatement).call(statements, step.params));
  }
  return next.value;
}

/** Runs `plan` to its end on an asynchronous driver, one awaited statement at a time. */
export async function runPlanAsync<R>(plan: Plan<R>, statements: AsyncLedgerStatements): Promise<R> {
  let next = plan.next();
  while (!next.done) {
    const step = next.value;
    next = plan.next(await (statements[step.name] as AnyStatement).call(statements, step.params));
  }
  return next.value;
}
