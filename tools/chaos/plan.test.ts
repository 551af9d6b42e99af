import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defaultBehaviourWeights, faultKinds, makePlan, type PlanParams } from './plan.js';

const params: PlanParams = {
  seed: '42',
  jobs: 300,
  durationMs: 60_000,
  workers: 3,
  leaseTtlMs: 1000,
  faultKinds,
  tenants: ['acme', 'globex', 'initech'],
  httpShare: 0.4,
  duplicateShare: 0.15,
  crossTenantKeyShare: 0.03,
  behaviourWeights: defaultBehaviourWeights,
};

describe('chaos plan', () => {
  it('is the same for the same seed, and another for another seed', () => {
    const a = makePlan(params);
    const b = makePlan({ ...params });
    assert.deepEqual(a, b);
    const c = makePlan({ ...params, seed: '43' });
    assert.notEqual(c.fingerprint.faults, a.fingerprint.faults);
    assert.notEqual(c.fingerprint.jobs, a.fingerprint.jobs);
  });

  it('keeps the fault schedule when only the number of jobs changes', () => {
    const a = makePlan(params);
    const b = makePlan({ ...params, jobs: 50 });
    assert.deepEqual(b.faults, a.faults);
    assert.notEqual(b.fingerprint.jobs, a.fingerprint.jobs);
  });

  it('schedules every fault kind at least once, in order, without overlap, pauses longer than the lease TTL', () => {
    for (const seed of ['1', '2', '3', 'x']) {
      const plan = makePlan({ ...params, seed });
      assert.deepEqual(new Set(plan.faults.map((f) => f.kind)), new Set(faultKinds));
      for (let i = 1; i < plan.faults.length; i++) {
        const before = plan.faults[i - 1]!;
        assert.ok(plan.faults[i]!.atMs >= before.atMs + before.durationMs, `fault ${i + 1} starts before fault ${i} ends`);
      }
      for (const pause of plan.faults.filter((f) => f.kind === 'worker-pause')) assert.ok(pause.durationMs > 2 * params.leaseTtlMs);
    }
  });

  it('never plans two jobs under one (tenant, key), and reuses keys across tenants', () => {
    const plan = makePlan({ ...params, jobs: 2000, crossTenantKeyShare: 0.2 });
    const pairs = new Set(plan.jobs.map((j) => `${j.tenant}/${j.key}`));
    assert.equal(pairs.size, plan.jobs.length);
    const keys = new Set(plan.jobs.map((j) => j.key));
    assert.ok(keys.size < plan.jobs.length, 'some key is used by two tenants');
  });

  it('mixes every behaviour and repeats some submissions', () => {
    const plan = makePlan(params);
    const behaviours = new Set(plan.jobs.map((j) => j.input.behaviour));
    assert.deepEqual(behaviours, new Set(Object.keys(defaultBehaviourWeights)));
    assert.ok(plan.jobs.some((j) => j.submissions.length === 2));
    assert.ok(plan.jobs.every((j) => j.submissions[0]!.atMs < params.durationMs));
  });
});
