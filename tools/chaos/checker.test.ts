/**
 * The checker on hand-written histories: a clean one passes every invariant, and each
 * planted bug (a lost job, a duplicate result message id, a stale settle accepted, ...)
 * is reported as a violation of the right invariant, naming the job.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AttemptRecord, Job, ResultMessage } from '../../src/ledger/ledger.js';
import { check, type CheckReport } from './checker.js';
import { forgedResultMark, type HistoryEvent, type RunConfig } from './history.js';
import type { ChaosInput } from './job-input.js';

const config: RunConfig = {
  seed: 'test',
  prefix: 'planrun',
  jobs: 1,
  durationMs: 10_000,
  workers: 2,
  slots: 2,
  leaseTtlMs: 1000,
  heartbeatMs: 300,
  sweepMs: 200,
  backoffMs: 100,
  backoffMaxMs: 300_000,
  redispatchMs: 5000,
  controlTimeoutMs: 1000,
  abortGraceMs: 1000,
  consumerTimeoutMs: 5000,
  reconnectAllowanceMs: 15_000,
  outputDir: '/out',
  httpAvailable: false,
  faultFingerprint: 'f',
  jobFingerprint: 'j',
};

const input: ChaosInput = { behaviour: 'ok', runMs: 100, outputBytes: 1000, nonce: 'n1' };
const outputPath = '/out/acme/j1/2/chaos-output.bin';

function job(overrides: Partial<Job> = {}): Job {
  return {
    id: 'j1',
    tenant: 'acme',
    type: 'chaos',
    input,
    requires: [],
    idempotencyKey: 'k1',
    state: 'finished',
    attempt: 2,
    maxAttempts: 3,
    timeoutSeconds: null,
    limits: null,
    priority: 0,
    concurrencyKey: null,
    concurrencyLimit: null,
    notBefore: 1000,
    leaseToken: null,
    leaseHolder: 'wB',
    leaseDeadline: null,
    cancelRequested: false,
    progress: 1,
    progressMessage: null,
    result: { data: { attempt: 2, sha256: 'abc', bytes: 1000 }, outputs: { 'chaos-output.bin': outputPath } },
    failureReason: null,
    error: null,
    createdAt: 1150,
    updatedAt: 3000,
    startedAt: 1200,
    endedAt: 3000,
    ...overrides,
  };
}

const attempts: AttemptRecord[] = [
  {
    jobId: 'j1',
    attempt: 1,
    worker: 'wA',
    startedAt: 1200,
    endedAt: 2500,
    outcome: 'expired',
    error: { class: 'transient', code: 'lease_expired', message: 'x' },
  },
  { jobId: 'j1', attempt: 2, worker: 'wB', startedAt: 2700, endedAt: 3000, outcome: 'finished', error: null },
];

function resultBody(overrides: Partial<ResultMessage> = {}): ResultMessage {
  const j = job();
  return { id: 'j1', idempotencyKey: 'k1', tenant: 'acme', type: 'chaos', state: 'finished', attempt: 2, result: j.result!, ...overrides };
}

type Event = HistoryEvent;
const at = (t: number, src: string, pid: number, event: Record<string, unknown>) => ({ t, src, pid, ...event }) as unknown as Event;

/** Job j1: attempt 1 on worker A loses its lease (A frozen), attempt 2 on worker B finishes. */
function cleanHistory(): Event[] {
  return [
    at(1000, 'runner', 1, { kind: 'run_config', config }),
    at(1100, 'runner', 1, { kind: 'submit', tenant: 'acme', key: 'k1', job: 0, transport: 'queue', acked: true, copy: 0, retry: 0, input, maxAttempts: 3 }),
    at(1150, 'orchestrator', 2, { kind: 'delivery', queue: 'planrun.submit', messageId: 'k1', redelivered: false }),
    at(1160, 'orchestrator', 2, {
      kind: 'publish',
      to: 'planrun.work.chaos',
      messageId: 'j1@1',
      tenantHeader: 'acme',
      body: { jobId: 'j1', attempt: 1, tenant: 'acme', type: 'chaos' },
      ok: true,
    }),
    at(1190, 'w1', 11, { kind: 'delivery', queue: 'planrun.work.chaos', messageId: 'j1@1', redelivered: false }),
    at(1200, 'orchestrator', 2, {
      kind: 'control',
      op: 'lease',
      req: { op: 'lease', jobId: 'j1', attempt: 1, tenant: 'acme', worker: 'wA' },
      ans: { op: 'lease', jobId: 'j1', attempt: 1, granted: true, token: 't1' },
    }),
    at(1201, 'w1', 11, { kind: 'worker_event', worker: 'wA', ev: { type: 'lease_granted', jobId: 'j1', attempt: 1, token: 't1' } }),
    at(1210, 'job', 21, { kind: 'run_start', jobId: 'j1', attempt: 1, tenant: 'acme', behaviour: 'ok', ppid: 11 }),
    at(1300, 'orchestrator', 2, {
      kind: 'control',
      op: 'heartbeat',
      req: { op: 'heartbeat', worker: 'wA', slots: 2, leases: [{ jobId: 'j1', attempt: 1, token: 't1', tenant: 'acme' }] },
      ans: { op: 'heartbeat', ttlMs: 1000, renewed: [{ jobId: 'j1', attempt: 1 }], lost: [] },
    }),
    at(1400, 'runner', 1, { kind: 'fault_start', fault: 1, fault_kind: 'worker-pause', target: 'w1' }),
    at(2520, 'orchestrator', 2, {
      kind: 'publish',
      to: 'planrun.work.chaos',
      messageId: 'j1@2',
      tenantHeader: 'acme',
      body: { jobId: 'j1', attempt: 2, tenant: 'acme', type: 'chaos' },
      ok: true,
    }),
    at(2690, 'w2', 12, { kind: 'delivery', queue: 'planrun.work.chaos', messageId: 'j1@2', redelivered: false }),
    at(2700, 'orchestrator', 2, {
      kind: 'control',
      op: 'lease',
      req: { op: 'lease', jobId: 'j1', attempt: 2, tenant: 'acme', worker: 'wB' },
      ans: { op: 'lease', jobId: 'j1', attempt: 2, granted: true, token: 't2' },
    }),
    at(2701, 'w2', 12, { kind: 'worker_event', worker: 'wB', ev: { type: 'lease_granted', jobId: 'j1', attempt: 2, token: 't2' } }),
    at(2710, 'job', 22, { kind: 'run_start', jobId: 'j1', attempt: 2, tenant: 'acme', behaviour: 'ok', ppid: 12 }),
    at(2850, 'job', 22, { kind: 'run_output', jobId: 'j1', attempt: 2, bytes: 1000, sha256: 'abc' }),
    at(2900, 'orchestrator', 2, {
      kind: 'control',
      op: 'fence',
      req: { op: 'fence', jobId: 'j1', attempt: 2, token: 't2', tenant: 'acme' },
      ans: { op: 'fence', jobId: 'j1', attempt: 2, live: true, ttlMs: 1000 },
    }),
    at(2950, 'w2', 12, {
      kind: 'worker_event',
      worker: 'wB',
      ev: { type: 'output_stored', jobId: 'j1', attempt: 2, outputs: { 'chaos-output.bin': outputPath } },
    }),
    at(3000, 'orchestrator', 2, {
      kind: 'control',
      op: 'settle',
      req: { op: 'settle', jobId: 'j1', attempt: 2, token: 't2', tenant: 'acme' },
      ans: { op: 'settle', jobId: 'j1', attempt: 2, accepted: true, state: 'finished', transition: 'finish' },
    }),
    at(3001, 'w2', 12, { kind: 'worker_event', worker: 'wB', ev: { type: 'settled', jobId: 'j1', attempt: 2, state: 'finished', transition: 'finish' } }),
    at(3002, 'w2', 12, { kind: 'worker_event', worker: 'wB', ev: { type: 'job_done', jobId: 'j1', attempt: 2 } }),
    at(3010, 'orchestrator', 2, {
      kind: 'publish',
      to: 'planrun.results',
      routingKey: 'acme.chaos.finished',
      messageId: 'j1',
      tenantHeader: 'acme',
      body: resultBody(),
      ok: true,
    }),
    at(3020, 'runner', 1, { kind: 'result', messageId: 'j1', routingKey: 'acme.chaos.finished', redelivered: false, body: resultBody() }),
    at(4000, 'runner', 1, { kind: 'fault_end', fault: 1, fault_kind: 'worker-pause', target: 'w1', ok: true }),
    at(4100, 'w1', 11, { kind: 'worker_event', worker: 'wA', ev: { type: 'lease_lost', jobId: 'j1', attempt: 1, reason: 'local_deadline_passed' } }),
    at(4101, 'w1', 11, { kind: 'worker_event', worker: 'wA', ev: { type: 'abandoned', jobId: 'j1', attempt: 1, reason: 'local_deadline_passed' } }),
    at(4102, 'w1', 11, { kind: 'worker_event', worker: 'wA', ev: { type: 'job_done', jobId: 'j1', attempt: 1 } }),
    at(5000, 'runner', 1, { kind: 'drain', complete: true, waitedMs: 10, missing: [] }),
    at(6000, 'runner', 1, { kind: 'queues_final', queues: [{ name: 'planrun.work.chaos', messages: 0, unacked: 0 }] }),
    at(6100, 'runner', 1, { kind: 'ledger_job', job: job(), attempts }),
    at(6101, 'runner', 1, { kind: 'stored_output', jobId: 'j1', name: 'chaos-output.bin', path: outputPath, exists: true, bytes: 1000, sha256: 'abc' }),
    at(6200, 'runner', 1, { kind: 'outbox_final', unsent: 0 }),
  ];
}

function violated(report: CheckReport): string[] {
  return report.invariants.filter((i) => i.status === 'violated').map((i) => i.id);
}

function invariant(report: CheckReport, id: string) {
  const found = report.invariants.find((i) => i.id === id);
  assert.ok(found, `no invariant ${id}`);
  return found;
}

/** Replaces the events `match` picks with `replace(event)` (none: dropped). */
function edit(events: Event[], match: (e: Event) => boolean, replace: (e: Event) => Event[]): Event[] {
  return events.flatMap((e) => (match(e) ? replace(e) : [e]));
}

const isKind = (kind: string) => (e: Event) => e.kind === kind;

describe('chaos checker', () => {
  it('passes a clean history with a lost lease and a retry', () => {
    const report = check(cleanHistory());
    assert.deepEqual(violated(report), []);
    assert.equal(report.ok, true);
    assert.equal(report.jobs.byOutcome.finished, 1);
    assert.equal(report.faults.length, 1);
  });

  it('reports a lost job: an acknowledged submission with no job in the ledger', () => {
    const events = edit(
      cleanHistory(),
      (e) => ['ledger_job', 'stored_output'].includes(e.kind),
      () => [],
    );
    // The ledger snapshot was taken (the outbox count is there) but holds no job for k1.
    const report = check(events);
    assert.ok(violated(report).includes('no-loss'));
    assert.match(invariant(report, 'no-loss').violations[0]!.message, /acme\/k1 has no job in the ledger/);
    assert.equal(report.ok, false);
  });

  it('reports a job left running after the drain', () => {
    const events = edit(cleanHistory(), isKind('ledger_job'), (e) => [
      {
        ...e,
        job: job({ state: 'running', endedAt: null, result: null }),
        attempts: [attempts[0]!, { ...attempts[1]!, endedAt: null, outcome: null }],
      } as Event,
    ]);
    const report = check(events);
    assert.ok(violated(report).includes('no-loss'));
    assert.equal(invariant(report, 'no-loss').violations[0]!.jobId, 'j1');
  });

  it('reports a duplicate result message id', () => {
    const events = edit(cleanHistory(), isKind('result'), (e) => [e, { ...e, t: e.t + 5, messageId: 'j1-again' } as Event]);
    const report = check(events);
    assert.deepEqual(violated(report), ['one-result']);
    const v = invariant(report, 'one-result').violations[0]!;
    assert.equal(v.jobId, 'j1');
    assert.match(v.message, /2 distinct message ids/);
    assert.ok(
      v.events.some((x) => x.kind === 'result'),
      'the violation carries the job events',
    );
  });

  it('reports a job whose effect two orchestrators both took: two ending settles, two result ids', () => {
    const settle = (e: Event) => e.kind === 'control' && e.op === 'settle';
    const twoSettles = edit(cleanHistory(), settle, (e) => [e, { ...e, t: e.t + 3, src: 'o2', pid: 3 }]);
    const report = check(twoSettles);
    assert.ok(violated(report).includes('one-effect-across-orchestrators'));
    assert.match(invariant(report, 'one-effect-across-orchestrators').violations[0]!.message, /2 settles ending it accepted, by orchestrator, o2/);

    const resultPublish = (e: Event) => e.kind === 'publish' && (e as { routingKey?: string }).routingKey !== undefined;
    const twoIds = edit(cleanHistory(), resultPublish, (e) => [e, { ...e, t: e.t + 3, src: 'o2', pid: 3, messageId: 'j1-o2' } as Event]);
    const message = invariant(check(twoIds), 'one-effect-across-orchestrators').violations[0]?.message;
    assert.match(message ?? '', /result published under 2 message ids \(j1 by orchestrator; j1-o2 by o2\)/);
  });

  it('accepts the same result message published again by another orchestrator (a relay that died after the confirm)', () => {
    const resultPublish = (e: Event) => e.kind === 'publish' && (e as { routingKey?: string }).routingKey !== undefined;
    const report = check(edit(cleanHistory(), resultPublish, (e) => [e, { ...e, t: e.t + 3, src: 'o2', pid: 3 }]));
    assert.deepEqual(violated(report), []);
    const effect = invariant(report, 'one-effect-across-orchestrators');
    assert.equal(effect.checked, 1);
    assert.match(effect.note ?? '', /orchestrators seen: o2, orchestrator/);
  });

  it('accepts a redelivered result with the same id and body', () => {
    const events = edit(cleanHistory(), isKind('result'), (e) => [e, { ...e, t: e.t + 5, redelivered: true } as Event]);
    assert.deepEqual(violated(check(events)), []);
  });

  it('reports two different answers under one result id', () => {
    const events = edit(cleanHistory(), isKind('result'), (e) => [e, { ...e, t: e.t + 5, body: resultBody({ state: 'failed', attempt: 1 }) } as Event]);
    assert.ok(violated(check(events)).includes('one-result'));
  });

  it('reports a stale settle accepted: attempt 1 settles after the ledger moved to attempt 2', () => {
    // A broken settle guard: worker A (attempt 1, lease expired) settles while B runs attempt
    // 2, and the ledger takes it, finishing the job with A's result under attempt 2's row.
    const events = edit(
      cleanHistory(),
      (e) => e.kind === 'control' && e.op === 'settle',
      (e) => [
        {
          ...e,
          req: { op: 'settle', jobId: 'j1', attempt: 1, token: 't1', tenant: 'acme' },
          ans: { op: 'settle', jobId: 'j1', attempt: 1, accepted: true, state: 'finished', transition: 'finish' },
        } as Event,
      ],
    );
    const report = check(events);
    assert.ok(violated(report).includes('no-stale-accepted'));
    const v = invariant(report, 'no-stale-accepted').violations[0]!;
    assert.equal(v.jobId, 'j1');
    assert.match(v.message, /settle of j1@1 accepted as finish, but the ledger says attempt 1 expired: a stale settle was accepted/);
  });

  it('reports a renewal accepted after the attempt ended', () => {
    const late = at(3600, 'orchestrator', 2, {
      kind: 'control',
      op: 'heartbeat',
      req: { op: 'heartbeat', worker: 'wA', slots: 2, leases: [{ jobId: 'j1', attempt: 1, token: 't1', tenant: 'acme' }] },
      ans: { op: 'heartbeat', ttlMs: 1000, renewed: [{ jobId: 'j1', attempt: 1 }], lost: [] },
    });
    const report = check([...cleanHistory(), late].sort((a, b) => a.t - b.t));
    assert.ok(violated(report).includes('no-stale-accepted'));
    assert.match(invariant(report, 'no-stale-accepted').violations[0]!.message, /renewal of j1@1 accepted, asked 1100 ms after the attempt ended/);
  });

  it('judges a renewal by when it was asked: a late answer to a request from before the end is the ledger ordering it first', () => {
    const stalled = at(3600, 'o2', 2, {
      kind: 'control',
      op: 'heartbeat',
      req: { op: 'heartbeat', worker: 'wA', slots: 2, leases: [{ jobId: 'j1', attempt: 1, token: 't1', tenant: 'acme' }] },
      ans: { op: 'heartbeat', ttlMs: 1000, renewed: [{ jobId: 'j1', attempt: 1 }], lost: [] },
      receivedAt: 2400,
    });
    const report = check([...cleanHistory(), stalled].sort((a, b) => a.t - b.t));
    assert.equal(invariant(report, 'no-stale-accepted').status, 'held');
  });

  it('reports a multipart upload completed (or its URLs renewed) after the attempt ended', () => {
    const late = (op: 'complete_upload' | 'renew_upload', t: number) =>
      at(t, 'orchestrator', 2, {
        kind: 'control',
        op,
        req: { op, jobId: 'j1', attempt: 1, token: 't1', tenant: 'acme', name: 'chaos-output.bin', uploadId: 'u1', parts: [] },
        ans: { op, jobId: 'j1', attempt: 1, live: true, ...(op === 'renew_upload' ? { parts: [], validForMs: 1000 } : {}) },
      });
    const report = check([...cleanHistory(), late('renew_upload', 3600), late('complete_upload', 3700)].sort((a, b) => a.t - b.t));
    assert.ok(violated(report).includes('no-stale-accepted'));
    assert.deepEqual(
      invariant(report, 'no-stale-accepted').violations.map((v) => /^(\S+) of j1@1 accepted, asked (\d+) ms after the attempt ended/.exec(v.message)?.slice(1)),
      [
        ['renew_upload', '1100'],
        ['complete_upload', '1200'],
      ],
    );
  });

  it('reports output stored by an attempt the ledger had already ended (a broken fence)', () => {
    const stale = at(4050, 'w1', 11, {
      kind: 'worker_event',
      worker: 'wA',
      ev: { type: 'output_stored', jobId: 'j1', attempt: 1, outputs: { 'chaos-output.bin': '/out/acme/j1/1/chaos-output.bin' } },
    });
    const report = check([...cleanHistory(), stale].sort((a, b) => a.t - b.t));
    assert.deepEqual(violated(report), ['fenced-output']);
    assert.match(
      invariant(report, 'fenced-output').violations[0]!.message,
      /j1@1 stored output 1550 ms after the ledger ended that attempt \(expired\), and no fence had passed/,
    );
    // The same late copy after a fence that passed while the lease was live: the race every lease check has.
    const fence = at(2400, 'orchestrator', 2, {
      kind: 'control',
      op: 'fence',
      req: { op: 'fence', jobId: 'j1', attempt: 1, token: 't1', tenant: 'acme' },
      ans: { op: 'fence', jobId: 'j1', attempt: 1, live: true, ttlMs: 1000 },
    });
    assert.deepEqual(violated(check([...cleanHistory(), fence, stale].sort((a, b) => a.t - b.t))), []);
  });

  it("reports a result whose stored output is not the settled attempt's", () => {
    const events = edit(cleanHistory(), isKind('stored_output'), (e) => [{ ...e, sha256: 'not-abc' } as Event]);
    const report = check(events);
    assert.deepEqual(violated(report), ['output-matches']);
  });

  /** The clean history as this version records it: the result names each output's { location, bytes, sha256 }, as its worker stored it. */
  function historyWithOutputFiles(resultSha256 = 'abc', messageSha256 = resultSha256): Event[] {
    const file = (sha256: string) => ({ 'chaos-output.bin': { location: `file://${outputPath}`, bytes: 1000, sha256 } });
    const result = (sha256: string) => ({ ...job().result!, outputFiles: file(sha256) });
    return cleanHistory().map((e) => {
      if (e.kind === 'ledger_job') return { ...e, job: job({ result: result(resultSha256) }) };
      if (e.kind === 'publish' && e.to === 'planrun.results') return { ...e, body: resultBody({ result: result(messageSha256) }) };
      if (e.kind === 'result') return { ...e, body: resultBody({ result: result(messageSha256) }) };
      if (e.kind === 'worker_event' && e.ev.type === 'output_stored') return { ...e, ev: { ...e.ev, files: file('abc') } };
      return e;
    });
  }

  it("with outputFiles: the stored file's sha256 (as found, and as its worker stored it) must be the one the result names", () => {
    assert.deepEqual(violated(check(historyWithOutputFiles())), []);
    const report = check(historyWithOutputFiles('fff'));
    assert.deepEqual(violated(report), ['output-matches']);
    assert.match(invariant(report, 'output-matches').violations[0]!.message, /output chaos-output\.bin as stored has sha256 abc, the result names fff/);
    assert.match(
      invariant(report, 'output-matches').violations[0]!.message,
      /output chaos-output\.bin as its worker stored it has sha256 abc, the result names fff/,
    );
    const differing = check(historyWithOutputFiles('abc', 'fff'));
    assert.match(invariant(differing, 'output-matches').violations[0]!.message, /the result message names other outputFiles than the ledger/);
  });

  it("with outputFiles: a losing attempt's output stored where the result names the settled one is a fenced-output violation", () => {
    const fence = at(2400, 'orchestrator', 2, {
      kind: 'control',
      op: 'fence',
      req: { op: 'fence', jobId: 'j1', attempt: 1, token: 't1', tenant: 'acme' },
      ans: { op: 'fence', jobId: 'j1', attempt: 1, live: true, ttlMs: 1000 },
    });
    const late = (location: string) =>
      at(4050, 'w1', 11, {
        kind: 'worker_event',
        worker: 'wA',
        ev: { type: 'output_stored', jobId: 'j1', attempt: 1, outputs: {}, files: { 'chaos-output.bin': { location, bytes: 1000, sha256: 'abd' } } },
      });
    // In its own attempt's folder, after a fence that passed in time: the harmless race.
    assert.deepEqual(violated(check([...historyWithOutputFiles(), fence, late('file:///out/acme/j1/1/chaos-output.bin')].sort((a, b) => a.t - b.t))), []);
    const report = check([...historyWithOutputFiles(), fence, late(`file://${outputPath}`)].sort((a, b) => a.t - b.t));
    assert.deepEqual(violated(report), ['fenced-output']);
    assert.match(
      invariant(report, 'fenced-output').violations[0]!.message,
      /j1@1 stored chaos-output\.bin where the result names the settled attempt's output/,
    );
  });

  it('takes a lease granted again to its holder (same token) as one lease', () => {
    const events = edit(
      cleanHistory(),
      (e) => e.kind === 'control' && e.op === 'lease' && e.req.attempt === 2,
      (e) => [e, { ...e, t: e.t + 1 }],
    );
    assert.deepEqual(violated(check(events)), []);
  });

  it('takes an abandoned grant (never taken up) followed by a new lease of the same attempt as allowed, and reports one that had been taken up', () => {
    const abandoned = (t: number) =>
      at(t, 'orchestrator', 2, {
        kind: 'control',
        op: 'lease',
        req: { op: 'lease', jobId: 'j1', attempt: 2, tenant: 'acme', worker: 'wC' },
        ans: { op: 'lease', jobId: 'j1', attempt: 2, granted: true, token: 't2-abandoned' },
      });
    const regranted = edit(
      cleanHistory(),
      (e) => e.kind === 'control' && e.op === 'lease' && e.req.attempt === 2,
      (e) => [abandoned(2600), e],
    );
    const clean = check(regranted);
    assert.deepEqual(violated(clean), []);
    assert.deepEqual(clean.abandons, { grants: 1, ran: 0, refused: 0 });

    const renewed = at(2650, 'orchestrator', 2, {
      kind: 'control',
      op: 'heartbeat',
      req: { op: 'heartbeat', worker: 'wC', slots: 1, leases: [{ jobId: 'j1', attempt: 2, token: 't2-abandoned', tenant: 'acme' }] },
      ans: { op: 'heartbeat', ttlMs: 1000, renewed: [{ jobId: 'j1', attempt: 2 }], lost: [] },
    });
    const report = check(
      edit(
        regranted,
        (e) => e.t === 2600,
        (e) => [e, renewed],
      ),
    );
    assert.ok(violated(report).includes('one-lease-per-attempt'));
    assert.match(invariant(report, 'one-lease-per-attempt').violations[0]!.message, /lease 1 had been taken up \(heartbeat accepted\): two live tokens/);
  });

  it('counts an abandoned grant that its worker had started, its token refused as superseded, and reports a refusal that says otherwise', () => {
    // wC's grant of attempt 2 was answered, wC started it, its heartbeat came after the
    // grant window: refused superseded (the ledger had taken the grant back and granted
    // attempt 2 again to wB); so was wC's settle.
    const abandoned = [
      at(2600, 'orchestrator', 2, {
        kind: 'control',
        op: 'lease',
        req: { op: 'lease', jobId: 'j1', attempt: 2, tenant: 'acme', worker: 'wC' },
        ans: { op: 'lease', jobId: 'j1', attempt: 2, granted: true, token: 't2-abandoned' },
      }),
      at(2601, 'w3', 13, { kind: 'worker_event', worker: 'wC', ev: { type: 'lease_granted', jobId: 'j1', attempt: 2, token: 't2-abandoned' } }),
    ];
    const heard = (reason: string, t = 2750) => [
      at(t, 'orchestrator', 2, {
        kind: 'control',
        op: 'heartbeat',
        req: { op: 'heartbeat', worker: 'wC', slots: 1, leases: [{ jobId: 'j1', attempt: 2, token: 't2-abandoned', tenant: 'acme' }] },
        ans: { op: 'heartbeat', ttlMs: 1000, renewed: [], lost: [{ jobId: 'j1', attempt: 2, reason }] },
      }),
      at(2751, 'w3', 13, { kind: 'worker_event', worker: 'wC', ev: { type: 'lease_lost', jobId: 'j1', attempt: 2, reason } }),
      at(2760, 'orchestrator', 2, {
        kind: 'control',
        op: 'settle',
        req: { op: 'settle', jobId: 'j1', attempt: 2, tenant: 'acme', token: 't2-abandoned', outcome: { kind: 'failed' } },
        ans: { op: 'settle', jobId: 'j1', attempt: 2, accepted: false, reason: 'superseded' },
      }),
    ];
    const history = (reason: string, t?: number) =>
      edit(
        cleanHistory(),
        (e) => e.kind === 'control' && e.op === 'lease' && e.req.attempt === 2,
        (e) => [...abandoned, e, ...heard(reason, t)],
      );

    const report = check(history('superseded'));
    assert.deepEqual(violated(report), []);
    assert.deepEqual(report.abandons, { grants: 1, ran: 1, refused: 2 });

    const wrong = check(history('expired'));
    assert.deepEqual(violated(wrong), ['one-lease-per-attempt']);
    assert.match(
      invariant(wrong, 'one-lease-per-attempt').violations[0]!.message,
      /a heartbeat naming the abandoned grant t2-abandoned of j1 was refused as expired, not superseded/,
    );
    // Asked before the attempt was granted again: its TTL may have passed before a sweep took it back.
    assert.deepEqual(violated(check(history('expired', 2650))), []);
  });

  it("counts an abandoned grant's slot against its tenant's running limit, for as long as it surely held it", () => {
    const limited = (events: Event[]) =>
      events.map((e) => (e.kind === 'run_config' ? { ...e, config: { ...config, grantWindowMs: 500, tenantLimits: { acme: 1 } } } : e));
    const grantAt = (t: number) =>
      at(t, 'orchestrator', 2, {
        kind: 'control',
        op: 'lease',
        req: { op: 'lease', jobId: 'j1', attempt: 2, tenant: 'acme', worker: 'wC' },
        ans: { op: 'lease', jobId: 'j1', attempt: 2, granted: true, token: 't2-abandoned' },
        receivedAt: t - 10,
      });
    const withGrant = (t: number) =>
      limited(
        edit(
          cleanHistory(),
          (e) => e.kind === 'control' && e.op === 'lease' && e.req.attempt === 2,
          (e) => [grantAt(t), e],
        ),
      );
    // Granted after attempt 1 ended (2500), taken back before attempt 2's grant (2700): one at a time.
    assert.deepEqual(violated(check(withGrant(2600))), []);
    // Granted while attempt 1 still held its lease: two at once, over a limit of 1.
    const report = check(withGrant(2400));
    assert.deepEqual(violated(report), ['limits']);
    assert.match(invariant(report, 'limits').violations[0]!.message, /tenant acme: 2 live leases .*abandoned grant t2-abandoned/);
  });

  it("takes a forged lease with the fleet key granted after an abandoned grant (the job queued again) as no theft, and an abandoned run as one of its attempt's runs", () => {
    const grant = (t: number, worker: string, token: string) =>
      at(t, 'orchestrator', 2, {
        kind: 'control',
        op: 'lease',
        req: { op: 'lease', jobId: 'j1', attempt: 2, tenant: 'acme', worker },
        ans: { op: 'lease', jobId: 'j1', attempt: 2, granted: true, token },
      });
    const forged = at(2651, 'runner', 1, {
      kind: 'forgery',
      op: 'lease',
      withKey: true,
      impersonates: true,
      req: { op: 'lease', jobId: 'j1', attempt: 2, worker: 'wB' },
      ans: { op: 'lease', jobId: 'j1', attempt: 2, granted: true, token: 't2-forged' },
    });
    // wC ran its abandoned grant and wrote other bytes before it heard; wB's run is the one settled.
    const abandonedRun = [
      at(2601, 'w3', 13, { kind: 'worker_event', worker: 'wC', ev: { type: 'lease_granted', jobId: 'j1', attempt: 2, token: 't2-abandoned' } }),
      at(2610, 'job', 23, { kind: 'run_start', jobId: 'j1', attempt: 2, tenant: 'acme', behaviour: 'ok', ppid: 13 }),
      at(2640, 'job', 23, { kind: 'run_output', jobId: 'j1', attempt: 2, bytes: 1000, sha256: 'abandoned-bytes' }),
    ];
    const events = edit(
      cleanHistory(),
      (e) => e.kind === 'control' && e.op === 'lease' && e.req.attempt === 2,
      (e) => [grant(2600, 'wC', 't2-abandoned'), ...abandonedRun, grant(2650, 'wB', 't2-forged'), forged, e],
    );
    const report = check(events);
    assert.deepEqual(violated(report), []);
    assert.deepEqual(report.abandons, { grants: 2, ran: 1, refused: 0 });
    assert.match(invariant(report, 'forgeries-refused').note ?? '', /1 forged leases with the fleet key were granted jobs whose grant had just been abandoned/);

    // The same forged grant as the attempt's first lease took a job nobody had abandoned.
    const first = edit(
      cleanHistory(),
      (e) => e.kind === 'control' && e.op === 'lease' && e.req.attempt === 2,
      (e) => [e, forged],
    );
    assert.ok(violated(check(first)).includes('forgeries-refused'));
  });

  it('reports the same attempt leased twice', () => {
    const events = edit(
      cleanHistory(),
      (e) => e.kind === 'control' && e.op === 'lease' && e.req.attempt === 2,
      (e) => [e, { ...e, t: e.t + 1, req: { ...(e as { req: object }).req, worker: 'wC' } } as Event],
    );
    const report = check(events);
    assert.ok(violated(report).includes('one-lease-per-attempt'));
  });

  it("holds when the adversary's forgeries are refused, and reports any that was granted or accepted", () => {
    const forgery = (t: number, op: string, withKey: boolean, ans: Record<string, unknown>, impersonates = true) =>
      at(t, 'runner', 1, { kind: 'forgery', op, withKey, impersonates, req: { op, jobId: 'j1', attempt: 2, worker: 'wB' }, ans });
    const refused = [
      forgery(2800, 'lease', true, { op: 'lease', jobId: 'j1', attempt: 2, granted: false, reason: 'already_running' }),
      forgery(2801, 'settle', true, { op: 'settle', jobId: 'j1', attempt: 2, accepted: false, reason: 'superseded' }),
      forgery(2802, 'heartbeat', true, { op: 'error', code: 'worker_conflict', message: 'x' }),
      forgery(2803, 'heartbeat', true, { op: 'heartbeat', ttlMs: 1000, renewed: [], lost: [] }, false),
      forgery(2804, 'lease', false, { op: 'error', code: 'unauthorized', message: 'x' }),
      forgery(2805, 'inputs', true, { op: 'inputs', jobId: 'j1', attempt: 2, live: false, reason: 'superseded' }),
    ];
    const clean = check([...cleanHistory(), ...refused]);
    assert.deepEqual(violated(clean), []);
    assert.equal(invariant(clean, 'forgeries-refused').checked, refused.length);

    for (const accepted of [
      forgery(2800, 'lease', true, { op: 'lease', jobId: 'j1', attempt: 2, granted: true, token: 't2' }),
      forgery(2801, 'settle', true, { op: 'settle', jobId: 'j1', attempt: 2, accepted: true, transition: 'finish' }),
      forgery(2802, 'heartbeat', true, { op: 'heartbeat', ttlMs: 1000, renewed: [], lost: [] }),
      forgery(2803, 'heartbeat', true, { op: 'heartbeat', ttlMs: 1000, renewed: [{ jobId: 'j1', attempt: 2 }], lost: [] }, false),
      forgery(2804, 'settle', false, { op: 'settle', jobId: 'j1', attempt: 2, accepted: false, reason: 'superseded' }),
      forgery(2805, 'inputs', true, { op: 'inputs', jobId: 'j1', attempt: 2, live: true, downloads: [{ location: 's3://b/k', url: 'https://x' }] }),
      forgery(2806, 'inputs', true, { op: 'inputs', jobId: 'j1', attempt: 2, live: true, refused: 'no store' }),
    ]) {
      assert.deepEqual(violated(check([...cleanHistory(), accepted])), ['forgeries-refused'], JSON.stringify(accepted));
    }

    const forgedResult = edit(cleanHistory(), isKind('ledger_job'), (e) => [{ ...e, job: job({ result: { data: { mark: forgedResultMark } } }) } as Event]);
    assert.ok(violated(check(forgedResult)).includes('forgeries-refused'));
  });

  it('reports a permanent failure that was retried', () => {
    const permanent: ChaosInput = { ...input, behaviour: 'permanent' };
    const events = edit(
      edit(cleanHistory(), isKind('submit'), (e) => [{ ...e, input: permanent } as Event]),
      isKind('ledger_job'),
      (e) => [
        {
          ...e,
          job: job({ input: permanent }),
          attempts: [{ ...attempts[0]!, outcome: 'retried', error: { class: 'permanent', code: 'chaos_permanent', message: 'x' } }, attempts[1]!],
        } as Event,
      ],
    );
    const report = check(events);
    assert.ok(violated(report).includes('permanent-once'));
  });

  it('reports attempts past the maximum and attempts without the backoff', () => {
    const events = edit(cleanHistory(), isKind('ledger_job'), (e) => [
      { ...e, job: job({ maxAttempts: 1 }), attempts: [attempts[0]!, { ...attempts[1]!, startedAt: 2510 }] } as Event,
    ]);
    const report = check(events);
    const messages = invariant(report, 'attempts')
      .violations.map((v) => v.message)
      .join('\n');
    assert.match(messages, /2 attempts, 1 allowed/);
    assert.match(messages, /attempt 2 started 10 ms after attempt 1 ended; the backoff is 100 ms/);
  });

  it('reports a queue left with messages and an unsent outbox', () => {
    let events = edit(cleanHistory(), isKind('queues_final'), (e) => [{ ...e, queues: [{ name: 'planrun.work.chaos', messages: 3, unacked: 0 }] } as Event]);
    events = edit(events, isKind('outbox_final'), (e) => [{ ...e, unsent: 2 } as Event]);
    const report = check(events);
    assert.deepEqual(violated(report), ['quiescent']);
    assert.equal(invariant(report, 'quiescent').violations.length, 2);
  });

  it('reports a worker running more jobs than its slots', () => {
    const extra = [1, 2].map((n) =>
      at(2702 + n, 'w2', 12, { kind: 'worker_event', worker: 'wB', ev: { type: 'lease_granted', jobId: `other${n}`, attempt: 1, token: `o${n}` } }),
    );
    const report = check([...cleanHistory(), ...extra].sort((a, b) => a.t - b.t));
    assert.ok(violated(report).includes('admission'));
  });

  it("reports more live leases than a tenant's running limit or a concurrency key's limit, and holds when the leases follow each other", () => {
    const limited = (limit: number) =>
      edit(cleanHistory(), isKind('run_config'), (e) => [{ ...e, config: { ...config, tenantLimits: { acme: limit } } } as Event]);
    const other = (from: number, to: number, overrides: Partial<Job> = {}) =>
      at(6150, 'runner', 1, {
        kind: 'ledger_job',
        job: job({ id: 'j2', ...overrides }),
        attempts: [{ jobId: 'j2', attempt: 1, worker: 'wB', startedAt: from, endedAt: to, outcome: 'finished', error: null }],
      });
    const withJob = (events: Event[], extra: Event) => [...events, extra].sort((a, b) => a.t - b.t);
    assert.ok(!violated(check(limited(1))).includes('limits'), 'one job: within a limit of 1');
    assert.ok(!violated(check(withJob(limited(1), other(2500, 2600)))).includes('limits'), 'j2 starts as j1 attempt 1 is reaped');
    const over = check(withJob(limited(1), other(2400, 2600)));
    assert.ok(violated(over).includes('limits'));
    assert.match(invariant(over, 'limits').violations[0]!.message, /tenant acme: 2 live leases at 2400 with a limit of 1/);
    assert.ok(!violated(check(withJob(limited(2), other(2400, 2600)))).includes('limits'), 'within a limit of 2');

    const keyed = { concurrencyKey: 'video-91', concurrencyLimit: 1 };
    const keyedHistory = edit(cleanHistory(), isKind('ledger_job'), (e) => [{ ...e, job: job(keyed) } as Event]);
    assert.ok(violated(check(withJob(keyedHistory, other(2400, 2600, keyed)))).includes('limits'), 'two leases of one key with a limit of 1');
    assert.ok(!violated(check(withJob(keyedHistory, other(2400, 2600)))).includes('limits'), 'j2 has no key');
  });

  it('reports a consumer timeout not explained by a fault on that connection', () => {
    const timeout = at(3500, 'w2', 12, {
      kind: 'broker_event',
      type: 'consumer_interrupted',
      queue: 'planrun.work.chaos',
      reason: 'PRECONDITION_FAILED - delivery acknowledgement on channel 3 timed out',
    });
    assert.ok(violated(check([...cleanHistory(), timeout].sort((a, b) => a.t - b.t))).includes('ack-early'));
    const excused = { ...timeout, src: 'w1', pid: 11 };
    assert.ok(!violated(check([...cleanHistory(), excused].sort((a, b) => a.t - b.t))).includes('ack-early'));
  });

  it('says so when the history has no final ledger state', () => {
    const events = cleanHistory().filter((e) => !['ledger_job', 'stored_output', 'outbox_final'].includes(e.kind));
    const report = check(events);
    assert.ok(violated(report).includes('no-loss'));
    assert.match(invariant(report, 'no-loss').violations[0]!.message, /no final ledger state/);
  });

  describe('over the object store (--store s3)', () => {
    const root = 's3://planrun-chaos/outputs';
    const store = { root, uploadGraceMs: 10_000, cleanupGraceMs: 2000 };
    const delivered = `${root}/acme/j1/2/chaos-output.bin`;
    const lost = `${root}/acme/j1/1/chaos-output.bin`;
    /** The clean history with its outputs in the store, ending with a listing of what is left there (by `cleanedUntil`). */
    function storeHistory(objects: string[], cleanedUntil = 60_000): Event[] {
      const events = JSON.parse(JSON.stringify(cleanHistory()).replaceAll('/out/acme/j1/', `${root}/acme/j1/`)) as Event[];
      const configured = edit(events, isKind('run_config'), (e) => [{ ...e, config: { ...config, store } } as Event]);
      return [...configured, at(6300, 'runner', 1, { kind: 'store_final', cleanedUntil, objects: objects.map((location) => ({ location, bytes: 1000 })) })];
    }

    it('passes when only the delivered attempt is left, the result naming it under the store root', () => {
      const report = check(storeHistory([delivered]));
      assert.deepEqual(violated(report), []);
      assert.equal(invariant(report, 'store-cleaned').checked, 1);
      assert.equal(invariant(report, 'output-matches').checked, 1);
    });

    it("reports a losing attempt's object still in the store after its grace", () => {
      const report = check(storeHistory([delivered, lost]));
      assert.deepEqual(violated(report), ['store-cleaned']);
      assert.match(invariant(report, 'store-cleaned').violations[0]!.message, /j1@1, an attempt that lost .* is still in the store/);
    });

    it("excuses a losing attempt's object while its URLs may still work or the grace runs", () => {
      // Its last live fence at 2000: URLs until 2000 + TTL + 10 s, then 2 s of grace (and 1 s for the answer).
      const fence = at(2000, 'orchestrator', 2, {
        kind: 'control',
        op: 'fence',
        req: { op: 'fence', jobId: 'j1', attempt: 1, token: 't1', tenant: 'acme' },
        ans: { op: 'fence', jobId: 'j1', attempt: 1, live: true, ttlMs: 1000 },
      });
      const within = [...storeHistory([delivered, lost], 2000 + 1000 + 10_000 + 2000 + 1000 - 1), fence].sort((a, b) => a.t - b.t);
      assert.deepEqual(violated(check(within)), []);
      assert.match(invariant(check(within), 'store-cleaned').note ?? '', /1 objects of losing attempts were still within their grace/);
      const past = [...storeHistory([delivered, lost], 2000 + 1000 + 10_000 + 2000 + 1000), fence].sort((a, b) => a.t - b.t);
      assert.deepEqual(violated(check(past)), ['store-cleaned']);
    });

    it('reports an object that is no attempt of a job in the ledger, and one past the job’s last attempt', () => {
      const report = check(storeHistory([delivered, `${root}/acme/nobody/1/x.bin`, `${root}/acme/j1/3/x.bin`]));
      assert.deepEqual(violated(report), ['store-cleaned']);
      assert.deepEqual(
        invariant(report, 'store-cleaned').violations.map((v) => v.message.replace(/ .*/, '')),
        [`${root}/acme/nobody/1/x.bin`, `${root}/acme/j1/3/x.bin`],
      );
    });

    it('reports a stored output whose bytes are not the digest the result states for it (outputFiles)', () => {
      const events = edit(storeHistory([delivered]), isKind('ledger_job'), (e) => {
        const ledgerJob = e as Extract<Event, { kind: 'ledger_job' }>;
        const result = { ...ledgerJob.job.result!, outputFiles: { 'chaos-output.bin': { location: delivered, bytes: 1000, sha256: 'other' } } };
        return [{ ...ledgerJob, job: { ...ledgerJob.job, result } }];
      });
      // (The result message, unchanged, no longer matches the ledger's either: one-result says so.)
      const report = check(events);
      assert.ok(violated(report).includes('output-matches'));
      assert.match(invariant(report, 'output-matches').violations[0]!.message, /as stored has sha256 abc, the result names other/);
    });

    it('reports an output named outside the store root', () => {
      const events = JSON.parse(
        JSON.stringify(storeHistory([delivered])).replaceAll(`${root}/acme/j1/2/chaos-output.bin`, 's3://elsewhere/acme/j1/2/chaos-output.bin'),
      ) as Event[];
      assert.ok(violated(check(events)).includes('output-matches'));
    });

    it('the folder store has nothing to clean', () => {
      const report = check(cleanHistory());
      assert.equal(invariant(report, 'store-cleaned').status, 'held');
      assert.equal(invariant(report, 'store-cleaned').checked, 0);
    });
  });
});
