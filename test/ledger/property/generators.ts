/** The generators of the ledger property test: random runs of operations (`Op`) for fast-check. */
import fc from 'fast-check';

import { propertyConfig, TENANTS, TYPES, WORKERS, type Op, type OutcomeKind, type SubmitSpec } from './model.js';

const MAX_COMMANDS = 60;

const submitSpecArb: fc.Arbitrary<SubmitSpec> = fc.record({
  tenant: fc.nat({ max: TENANTS.length - 1 }),
  type: fc.nat({ max: TYPES.length - 1 }),
  key: fc.option(fc.nat({ max: 3 }), { freq: 2 }),
  maxAttempts: fc.option(fc.integer({ min: 1, max: 4 }), { freq: 2 }),
});
const workerArb = fc.nat({ max: WORKERS.length - 1 });
const pickArb = fc.nat({ max: 15 });
const outcomeArb = fc.constantFrom<OutcomeKind>('finished', 'finished', 'permanent', 'transient', 'transient', 'transient', 'fatal');
const ttl = propertyConfig.leaseTtlMs;
const advanceArb = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 3_000 }) },
  { weight: 2, arbitrary: fc.integer({ min: 3_000, max: 12_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: ttl, max: 4 * ttl }) },
  { weight: 1, arbitrary: fc.constantFrom(ttl - 1, ttl, 1_000, 999, 1) },
);

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 7, arbitrary: submitSpecArb.map((s): Op => ({ k: 'submit', s })) },
  { weight: 2, arbitrary: fc.array(submitSpecArb, { minLength: 1, maxLength: 3 }).map((items): Op => ({ k: 'submitMany', items })) },
  { weight: 5, arbitrary: fc.constantFrom(false, false, false, true).map((lose): Op => ({ k: 'relay', lose })) },
  {
    weight: 10,
    arbitrary: fc
      .record({
        w: workerArb,
        msg: pickArb,
        redelivery: fc.constantFrom(false, false, true),
        future: fc.constantFrom(false, false, false, false, false, true),
      })
      .map((r): Op => ({ k: 'grant', ...r })),
  },
  { weight: 1, arbitrary: fc.record({ msg: pickArb, redelivery: fc.boolean() }).map((r): Op => ({ k: 'grantRace', ...r })) },
  {
    weight: 1,
    arbitrary: fc.record({ h: pickArb, withProof: fc.constantFrom<'none' | 'guessed'>('none', 'guessed') }).map((r): Op => ({ k: 'forgedGrant', ...r })),
  },
  { weight: 5, arbitrary: workerArb.map((w): Op => ({ k: 'renew', w })) },
  { weight: 1, arbitrary: fc.record({ ref: pickArb, forge: fc.boolean() }).map((r): Op => ({ k: 'check', ...r })) },
  {
    weight: 2,
    arbitrary: fc.record({ h: pickArb, fraction: fc.integer({ min: 0, max: 100 }).map((n) => n / 100) }).map((r): Op => ({ k: 'progress', ...r })),
  },
  {
    weight: 1,
    arbitrary: fc
      .record({ ref: pickArb, fraction: fc.integer({ min: 0, max: 100 }).map((n) => n / 100), forge: fc.boolean() })
      .map((r): Op => ({ k: 'staleProgress', ...r })),
  },
  { weight: 8, arbitrary: fc.record({ h: pickArb, outcome: outcomeArb }).map((r): Op => ({ k: 'settle', ...r })) },
  { weight: 3, arbitrary: fc.record({ ref: pickArb, outcome: outcomeArb, forge: fc.boolean() }).map((r): Op => ({ k: 'staleSettle', ...r })) },
  { weight: 1, arbitrary: pickArb.map((h): Op => ({ k: 'settleRace', h })) },
  {
    weight: 3,
    arbitrary: fc
      .record({ ref: pickArb, stale: fc.constantFrom(false, false, true), forge: fc.constantFrom(false, false, false, true) })
      .map((r): Op => ({ k: 'release', ...r })),
  },
  {
    weight: 3,
    arbitrary: fc
      .record({
        job: pickArb,
        among: fc.constantFrom<'running' | 'open' | 'all'>('running', 'running', 'open', 'all'),
        tenant: fc.constantFrom<'own' | 'none' | 'other'>('own', 'own', 'none', 'other'),
      })
      .map((r): Op => ({ k: 'cancel', ...r })),
  },
  { weight: 1, arbitrary: pickArb.map((job): Op => ({ k: 'reject', job })) },
  { weight: 3, arbitrary: fc.constant<Op>({ k: 'sweep' }) },
  { weight: 2, arbitrary: fc.constant<Op>({ k: 'releasePass' }) },
  { weight: 6, arbitrary: advanceArb.map((ms): Op => ({ k: 'advance', ms })) },
  {
    weight: 3,
    arbitrary: fc
      .record({
        target: fc.constantFrom<'deadline' | 'notBefore'>('deadline', 'deadline', 'notBefore'),
        pick: pickArb,
        delta: fc.constantFrom<-1 | 0 | 1>(-1, 0, 1),
      })
      .map((r): Op => ({ k: 'advanceTo', ...r })),
  },
  { weight: 1, arbitrary: workerArb.map((w): Op => ({ k: 'crash', w })) },
);

export const opsArb = fc.array(opArb, { minLength: 1, maxLength: MAX_COMMANDS, size: 'max' });
