import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { defaultLedgerConfig, type Job } from '../ledger.js';
import { runPlan, runPlanAsync, type AsyncLedgerStatements, type Plan, type Step } from './plan.js';
import { settle } from './settle.js';
import type { LedgerStatements } from './statements.js';

const now = Date.UTC(2026, 0, 1);
// fifo: a requeue then writes its work message, so the plan shows a statement of each kind.
const env = { now, config: { ...defaultLedgerConfig, dispatch: 'fifo' as const } };

const running: Job = {
  id: 'j1',
  tenant: 't',
  type: 'x',
  input: {},
  requires: [],
  idempotencyKey: null,
  state: 'running',
  attempt: 1,
  maxAttempts: 3,
  timeoutSeconds: null,
  limits: null,
  priority: 0,
  concurrencyKey: null,
  concurrencyLimit: null,
  notBefore: now - 10,
  leaseToken: 'tok',
  leaseHolder: 'w',
  leaseDeadline: now + 1000,
  cancelRequested: false,
  progress: null,
  progressMessage: null,
  result: null,
  failureReason: null,
  error: null,
  createdAt: now - 10,
  updatedAt: now - 10,
  startedAt: now - 5,
  endedAt: null,
};

/** Answers for the statements a settle asks, recording each step it was asked. */
function answers(steps: Step[]): Record<string, (params: unknown) => unknown> {
  const record = (name: string, answer: unknown) => (params: unknown) => {
    steps.push({ name, params } as Step);
    return answer;
  };
  return {
    lockJob: record('lockJob', running),
    requeueAttempt: record('requeueAttempt', true),
    closeAttempt: record('closeAttempt', undefined),
    insertOutbox: record('insertOutbox', undefined),
    markDispatched: record('markDispatched', undefined),
  };
}

function syncStatements(steps: Step[]): LedgerStatements {
  return answers(steps) as unknown as LedgerStatements;
}

function asyncStatements(steps: Step[]): AsyncLedgerStatements {
  const sync = answers(steps);
  return Object.fromEntries(Object.entries(sync).map(([name, f]) => [name, async (params: unknown) => f(params)])) as unknown as AsyncLedgerStatements;
}

const retry = () => settle({ jobId: 'j1', attempt: 1, token: 'tok', outcome: { kind: 'failed', error: { class: 'transient', code: 'x', message: 'y' } } }, env);

describe('ledger operation plans', () => {
  it('one plan runs the same statements, and answers the same, on a synchronous and an asynchronous driver', async () => {
    const syncSteps: Step[] = [];
    const asyncSteps: Step[] = [];
    const a = runPlan(retry(), syncStatements(syncSteps));
    const b = await runPlanAsync(retry(), asyncStatements(asyncSteps));
    assert.deepEqual(b, a);
    assert.deepEqual(asyncSteps, syncSteps);
    assert.deepEqual(
      syncSteps.map((s) => s.name),
      ['lockJob', 'requeueAttempt', 'closeAttempt', 'insertOutbox', 'markDispatched'],
    );
    assert.ok(a.accepted && a.transition === 'retry' && a.job.attempt === 2 && a.job.state === 'queued');
  });

  it('a statement that throws ends the plan with its error, on either driver', async () => {
    const boom = new Error('disk full');
    const failing = {
      ...answers([]),
      closeAttempt: () => {
        throw boom;
      },
    };
    assert.throws(() => runPlan(retry(), failing as unknown as LedgerStatements), boom);
    const failingAsync = {
      ...answers([]),
      closeAttempt: async () => {
        throw boom;
      },
    };
    await assert.rejects(runPlanAsync(retry(), failingAsync as unknown as AsyncLedgerStatements), boom);
  });

  it('validation refuses before any statement runs', () => {
    const steps: Step[] = [];
    const bad: Plan<unknown> = settle({ jobId: 'j1', attempt: 1, token: 'tok', outcome: { kind: 'nope' } as never }, env);
    assert.throws(() => runPlan(bad, syncStatements(steps)), /settle outcome/);
    assert.equal(steps.length, 0);
  });
});
