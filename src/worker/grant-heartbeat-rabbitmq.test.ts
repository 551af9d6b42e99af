/**
 * The heartbeat a worker sends right after a grant, lost on the way (RabbitMQ). The ledger
 * takes back a grant nobody renewed within its grant window (edge abandon); the next timed
 * heartbeat comes too late for that (here 60 s away), so the worker sends the lost one again
 * at each control timeout. Within the window, the retry takes the grant up and the job runs
 * on; past it, the retry's answer says the lease was superseded, the worker stops the job,
 * and the job runs again at the same attempt, on the same worker.
 *
 * The loss: the worker's broker connection drops the heartbeat requests that name the lease
 * under test (they never reach the orchestrator) and times them out as the broker would.
 */
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { after, describe, it } from 'node:test';
import { BrokerError, type Broker, type RequestOptions } from '../broker/broker.js';
import { RabbitMqBroker } from '../broker/rabbitmq.js';
import type { WorkerEvent } from './worker-events.js';
import { Harness } from '../../test/testing/harness.js';
import { rabbitMqUrl } from '../../test/testing/services.js';
import { waitFor } from '../../test/testing/wait.js';

interface NamedLease {
  jobId: string;
  attempt: number;
  token: string;
}

/** The leases a control message's heartbeats name (a message may be a batch). */
function heartbeatLeases(body: Buffer): NamedLease[] {
  const message = JSON.parse(body.toString()) as { op: string; requests?: Array<{ op: string; leases?: NamedLease[] }>; leases?: NamedLease[] };
  const requests = message.op === 'batch' ? (message.requests ?? []) : [message];
  return requests.flatMap((request) => (request.op === 'heartbeat' ? (request.leases ?? []) : []));
}

/**
 * `broker`, except that a control request whose heartbeat names a lease `lose` picks is
 * never sent: the call fails with `timeout` after the request's timeout, as for a lost one.
 */
function losingHeartbeats(broker: Broker, lose: (leases: NamedLease[]) => boolean | Promise<boolean>): Broker & { lost: number } {
  const state = { lost: 0 };
  const request = async (queue: string, body: Buffer, options: RequestOptions): Promise<Buffer> => {
    if (await lose(heartbeatLeases(body))) {
      state.lost++;
      await delay(options.timeoutMs);
      throw new BrokerError('timeout', `no answer to the request within ${options.timeoutMs} ms (lost on purpose)`);
    }
    return broker.request(queue, body, options);
  };
  return new Proxy(broker, {
    get(target, property) {
      if (property === 'request') return request;
      if (property === 'lost') return state.lost;
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  }) as Broker & { lost: number };
}

const ofType = <T extends WorkerEvent['type']>(events: WorkerEvent[], type: T) => events.filter((e): e is Extract<WorkerEvent, { type: T }> => e.type === type);

describe('the heartbeat after a grant, lost on the way (RabbitMQ)', () => {
  const opened: Broker[] = [];
  const connect = async () => {
    const broker = await RabbitMqBroker.connect({ url: rabbitMqUrl, heartbeatSeconds: 2 });
    opened.push(broker);
    return broker;
  };
  after(async () => {
    await Promise.all(opened.map((broker) => broker.close()));
  });

  async function start(grantWindowMs: number): Promise<Harness> {
    // A lease TTL far longer than the window: only the abandon edge can take the grant back.
    return new Harness({ broker: await connect(), ledgerConfig: { leaseTtlMs: 20_000, grantWindowMs }, sweepIntervalMs: 50 }).start();
  }

  const timing = { heartbeatIntervalMs: 60_000, controlTimeoutMs: 250 };

  it('is sent again at the control timeout and takes the grant up within the window: the job runs on', async () => {
    const harness = await start(1500);
    try {
      let lostOnce = false;
      const broker = losingHeartbeats(await connect(), (leases) => {
        if (lostOnce || leases.length === 0) return false;
        lostOnce = true;
        return true;
      });
      const { worker, events } = await harness.startWorker(broker, { timing });
      // One step: its only progress report (which would take the grant up too) comes at the end, past the window.
      const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 2000, steps: 1, runLog: harness.runLog } });
      const result = await waitFor('the result', () => harness.resultsFor(job.id)[0], 15_000);

      assert.equal(broker.lost, 1, 'the heartbeat after the grant was lost');
      assert.ok(ofType(events, 'grant_heartbeat_retried').length >= 1, 'and sent again');
      assert.deepEqual(ofType(events, 'lease_lost'), [], 'the lease was never lost');
      assert.equal(result.body.state, 'finished');
      assert.deepEqual(
        (await harness.ledger.getAttempts(job.id)).map((a) => [a.attempt, a.worker, a.outcome]),
        [[1, worker.id, 'finished']],
      );
      assert.equal(ofType(events, 'lease_granted').length, 1, 'granted once');
      assert.equal(harness.runs(job.id).length, 1, 'run once');
    } finally {
      await harness.close();
    }
  });

  it("past the window, the retry's answer says superseded: the job is stopped, and runs again at the same attempt", async () => {
    const harness = await start(300);
    try {
      let firstToken: string | undefined;
      // The first grant's heartbeats are lost for as long as the ledger holds that grant: the
      // first one to get through comes after the abandon.
      const broker = losingHeartbeats(await connect(), async (leases) => {
        const first = leases.find((l) => (firstToken ??= l.token) === l.token);
        return first !== undefined && (await harness.ledger.getJob(first.jobId))?.leaseToken === first.token;
      });
      const { worker, events } = await harness.startWorker(broker, { timing });
      const { job } = await harness.orchestrator.submit({ tenant: 'acme', type: 'probe', input: { ms: 1500, steps: 1, runLog: harness.runLog } });
      const result = await waitFor('the result', () => harness.resultsFor(job.id)[0], 15_000);

      assert.ok(broker.lost >= 1, 'the heartbeats after the first grant were lost');
      assert.ok(ofType(events, 'grant_heartbeat_retried').length >= 1, 'and sent again');
      const granted = ofType(events, 'lease_granted');
      assert.deepEqual(
        granted.map((e) => e.attempt),
        [1, 1],
        'granted twice, at the same attempt',
      );
      assert.equal(granted[0]!.token, firstToken);
      assert.notEqual(granted[1]!.token, firstToken, 'with a new token');
      assert.deepEqual(
        ofType(events, 'lease_lost'),
        [{ type: 'lease_lost', jobId: job.id, attempt: 1, reason: 'superseded' }],
        'the first lease lost as superseded',
      );
      assert.deepEqual(
        ofType(events, 'abandoned'),
        [{ type: 'abandoned', jobId: job.id, attempt: 1, reason: 'superseded' }],
        'its run stopped, its outcome dropped',
      );
      assert.equal(result.body.state, 'finished');
      assert.equal(result.body.attempt, 1, 'no attempt spent');
      assert.deepEqual(
        (await harness.ledger.getAttempts(job.id)).map((a) => [a.attempt, a.worker, a.outcome]),
        [[1, worker.id, 'finished']],
      );
      assert.deepEqual(
        harness.runs(job.id).map((run) => run.attempt),
        [1, 1],
        'run twice, both attempt 1',
      );
      assert.equal(harness.resultsFor(job.id).length, 1, 'one result');
    } finally {
      await harness.close();
    }
  });
});
