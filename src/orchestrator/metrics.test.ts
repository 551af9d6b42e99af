import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { EmbeddedBroker } from '../broker/embedded.js';
import { Harness } from '../../test/testing/harness.js';
import { waitFor } from '../../test/testing/wait.js';
import { TypeLabels } from './type-labels.js';

function sample(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name} `)));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

describe('orchestrator metrics', () => {
  const broker = new EmbeddedBroker();
  let harness: Harness;
  before(async () => {
    harness = await new Harness({ broker: broker.connect(), ledgerConfig: { backoffBaseMs: 20 } }).start();
  });
  after(async () => {
    await harness.close();
    await broker.close();
  });

  it('count jobs by state, settles by transition, retries, exhaustion and the submit-to-start latency', async () => {
    await harness.startWorker(broker.connect());
    // A type is labelled by name only once a worker of the fleet offers it.
    await waitFor('the worker in the fleet', () => harness.orchestrator.fleet.list().length === 1);
    const ok = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 10, runLog: harness.runLog } });
    const bad = await harness.orchestrator.submit({
      tenant: 'acme',
      type: 'probe',
      input: { ms: 10, runLog: harness.runLog, fail: 'transient' },
      maxAttempts: 2,
    });
    await waitFor('both results', () => harness.resultsFor(ok.job.id).length === 1 && harness.resultsFor(bad.job.id).length === 1);
    const { body, contentType } = await harness.orchestrator.metrics.render();
    assert.match(contentType, /text\/plain/);
    assert.ok(sample(body, 'planrun_process_cpu_user_seconds_total') !== undefined, 'process metrics under planrun_process_');
    assert.ok(!body.includes('planrun_process_process_'), 'no doubled prefix');
    assert.equal(sample(body, 'planrun_jobs', '{state="finished"}'), 1);
    assert.equal(sample(body, 'planrun_jobs', '{state="failed"}'), 1);
    assert.equal(sample(body, 'planrun_jobs', '{state="queued"}'), 0);
    assert.equal(sample(body, 'planrun_running_leases'), 0);
    assert.equal(sample(body, 'planrun_jobs_submitted_total', '{type="probe"}'), 2);
    assert.equal(sample(body, 'planrun_settles_total', '{type="probe",transition="finish"}'), 1);
    assert.equal(sample(body, 'planrun_settles_total', '{type="probe",transition="retry"}'), 1);
    assert.equal(sample(body, 'planrun_settles_total', '{type="probe",transition="exhaust"}'), 1);
    assert.equal(sample(body, 'planrun_retries_total', '{type="probe"}'), 1);
    assert.equal(sample(body, 'planrun_exhausted_total', '{type="probe"}'), 1);
    assert.equal(sample(body, 'planrun_submit_to_start_seconds_count', '{type="probe"}'), 2);
    assert.equal(sample(body, 'planrun_run_duration_seconds_count', '{type="probe",outcome="finish"}'), 1);
    await waitFor('the outbox to drain', async () => (await harness.ledger.outboxStats()).unsent === 0);
    const drained = (await harness.orchestrator.metrics.render()).body;
    assert.equal(sample(drained, 'planrun_outbox_backlog'), 0);
    assert.equal(sample(drained, 'planrun_outbox_oldest_age_seconds'), 0);
    // Gauges by type: no tenant label unless asked for; a type whose jobs all ended reads 0.
    assert.doesNotMatch(drained, /tenant=/);
  });

  it("a type no worker offers is counted as _other: another tenant's type names never become labels", async () => {
    await waitFor('a worker in the fleet', () => harness.orchestrator.fleet.list().length > 0);
    for (let n = 0; n < 5; n++) await harness.orchestrator.submit({ tenant: 'globex', type: `secret-plan-${n}`, input: {} });
    const { body } = await harness.orchestrator.metrics.render();
    assert.doesNotMatch(body, /secret-plan/);
    assert.equal(sample(body, 'planrun_jobs_submitted_total', '{type="_other"}'), 5);
    assert.equal(sample(body, 'planrun_jobs_submitted_total', '{type="probe"}'), 2, 'an offered type keeps its own label');
  });
});

describe('queued and running jobs by type and tenant, and the lag', () => {
  const broker = new EmbeddedBroker();
  let harness: Harness;
  before(async () => {
    harness = await new Harness({ broker: broker.connect(), metricsTenantLabel: true }).start();
  });
  after(async () => {
    await harness.close();
    await broker.close();
  });

  it('count queued and running jobs by type and tenant, age the oldest due queued job per type, and read 0 once they are gone', async () => {
    const worker = await harness.startWorker(broker.connect(), { slots: 1 });
    await waitFor('the worker in the fleet', () => harness.orchestrator.fleet.list().length === 1);
    const long = { ms: 60_000, runLog: harness.runLog };
    const first = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: long });
    await waitFor('the first job to run', async () => (await harness.ledger.getJob(first.job.id))?.state === 'running');
    const waiting = [
      await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: long }),
      await harness.orchestrator.submit({ tenant: 'globex', type: 'probe', input: long }),
    ];
    let body = '';
    await waitFor('the oldest queued job to have waited', async () => {
      body = (await harness.orchestrator.metrics.render()).body;
      return (sample(body, 'planrun_oldest_queued_age_seconds', '{type="probe"}') ?? 0) > 0;
    });
    assert.equal(sample(body, 'planrun_running_jobs', '{type="probe",tenant="acme"}'), 1);
    assert.equal(sample(body, 'planrun_queued_jobs', '{type="probe",tenant="acme"}'), 1);
    assert.equal(sample(body, 'planrun_queued_jobs', '{type="probe",tenant="globex"}'), 1);
    const age = sample(body, 'planrun_oldest_queued_age_seconds', '{type="probe"}')!;
    const waitedAtMost = (Date.now() - waiting[0]!.job.createdAt) / 1000;
    assert.ok(age <= waitedAtMost, `the lag ${age} s is no more than the oldest job has waited (${waitedAtMost} s)`);
    for (const { job } of [first, ...waiting]) await harness.orchestrator.cancel(job.id, job.tenant);
    await worker.stop();
    await waitFor('no job left queued or running', async () => {
      const counts = await harness.ledger.countJobsByState();
      return counts.queued + counts.running === 0;
    });
    const after = (await harness.orchestrator.metrics.render()).body;
    assert.equal(sample(after, 'planrun_queued_jobs', '{type="probe",tenant="globex"}'), 0, 'a series with no jobs left reads 0');
    assert.equal(sample(after, 'planrun_running_jobs', '{type="probe",tenant="acme"}'), 0);
    assert.equal(sample(after, 'planrun_oldest_queued_age_seconds', '{type="probe"}'), 0);
  });
});

describe('type labels', () => {
  it('name at most `max` offered types, keep a label once given, and fold everything else into _other', () => {
    const offered = new Set(['render', 'encode', 'upload']);
    const labels = new TypeLabels((type) => offered.has(type), 2);
    assert.equal(labels.of('render'), 'render');
    assert.equal(labels.of('nobody-offers-me'), '_other');
    assert.equal(labels.of('encode'), 'encode');
    assert.equal(labels.of('upload'), '_other', 'over the cap');
    offered.clear();
    assert.equal(labels.of('render'), 'render', 'kept after its workers left');
  });
});

describe('orchestrator metrics: abandoned grants', () => {
  const broker = new EmbeddedBroker();
  let harness: Harness;
  before(async () => {
    // A short grant window, a long TTL: only the abandon edge can take the grant back here.
    harness = await new Harness({ broker: broker.connect(), ledgerConfig: { grantWindowMs: 100, leaseTtlMs: 60_000 } }).start();
  });
  after(async () => {
    await harness.close();
    await broker.close();
  });

  it('count a grant nobody took up, taken back by the dispatcher at the same attempt', async () => {
    const { job } = await harness.ledger.submit({ tenant: 'acme', type: 'probe', input: {} });
    const granted = await harness.ledger.grantLease({ jobId: job.id, attempt: 1, worker: 'gone-before-the-answer' });
    assert.equal(granted.granted, true);
    const abandoned = async () => sample((await harness.orchestrator.metrics.render()).body, 'planrun_grants_abandoned_total', '{type="_other"}');
    await waitFor('the grant counted as abandoned', async () => (await abandoned()) === 1);
    const after = await harness.ledger.getJob(job.id);
    assert.equal(after?.state, 'queued');
    assert.equal(after?.attempt, 1, 'no attempt spent');
    assert.deepEqual(await harness.ledger.getAttempts(job.id), []);
    const renewal = await harness.ledger.renewLeases({
      worker: 'gone-before-the-answer',
      leases: [{ jobId: job.id, attempt: 1, token: granted.granted ? granted.token : '' }],
    });
    assert.deepEqual(renewal.lost, [{ jobId: job.id, attempt: 1, reason: 'superseded' }], 'its token is dead');
  });
});
