/**
 * The ledger conformance suite: every transition and every refusal of the Ledger contract
 * (src/ledger/ledger.ts, and the edges drawn in docs/state-machine.md), stated through the
 * interface alone so that every driver runs the same suite:
 *
 *   ledgerConformance('sqlite', factory);
 *
 * Each test opens a fresh ledger from `factory` on a ManualClock; time only moves when a test
 * moves it, and nothing sleeps.
 *
 * One file per area, each declaring its own `describe` block over the `run` harness; they
 * run in the order below. A new ledger operation gets a file of its own, called from here.
 */
import { describe } from 'node:test';

import type { LedgerConfig } from '../../../src/ledger/ledger.js';
import { testConfig, withLedger, type LedgerFactory, type LedgerHarness } from '../testing.js';
import { abandonConformance } from './abandon.js';
import { apiKeysConformance } from './api-keys.js';
import { cancelConformance } from './cancel.js';
import { dispatchConformance } from './dispatch.js';
import { fenceConformance } from './fence.js';
import { fleetConformance } from './fleet.js';
import { grantConformance } from './grant.js';
import type { Run } from './helpers.js';
import { logsConformance } from './logs.js';
import { nulConformance } from './nul.js';
import { outboxConformance } from './outbox.js';
import { progressConformance } from './progress.js';
import { queriesConformance } from './queries.js';
import { redriveConformance } from './redrive.js';
import { rejectConformance } from './reject.js';
import { releaseConformance } from './release.js';
import { renewConformance } from './renew.js';
import { retentionConformance } from './retention.js';
import { settleConformance } from './settle.js';
import { submitConformance } from './submit.js';
import { sweepConformance } from './sweep.js';
import { terminalConformance } from './terminal.js';
import { uploadGrantsConformance } from './upload-grants.js';

export type { LedgerFactory } from '../testing.js';

export function ledgerConformance(name: string, factory: LedgerFactory): void {
  const run: Run = <T>(body: (h: LedgerHarness) => Promise<T>, config: Partial<LedgerConfig> | undefined = testConfig) => withLedger(factory, config, body);

  describe(`ledger conformance: ${name}`, () => {
    submitConformance(run);
    grantConformance(run);
    renewConformance(run);
    fenceConformance(run);
    progressConformance(run);
    settleConformance(run);
    releaseConformance(run);
    abandonConformance(run);
    cancelConformance(run);
    rejectConformance(run);
    sweepConformance(run);
    outboxConformance(run);
    queriesConformance(run);
    terminalConformance(run);
    nulConformance(run);
    uploadGrantsConformance(run);
    fleetConformance(run);
    apiKeysConformance(run);
    logsConformance(run);
    redriveConformance(run);
    retentionConformance(run);
    dispatchConformance(run);
  });
}
