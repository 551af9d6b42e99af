/**
 * The network blip (issue 3, test 2) with the workers' folder store: the scenario and the
 * promises every store keeps are in test/worker/network-blip.ts. Promise G3 here: nothing
 * of A's becomes visible in the folder store either: the job's folder holds attempt 2's
 * folder alone, and its bytes are the ones B's child wrote (compared with what each child
 * says it wrote).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { networkBlip, variants, type BlipStore } from '../../test/worker/network-blip.js';
import { stubbornOutputFile } from '../../test/worker/fixtures/stubborn-jobs.js';
import { DirectoryOutputStore } from './output-store.js';

const folderStore: BlipStore = {
  locationOf: (harness, jobId, attempt) =>
    join(new DirectoryOutputStore(harness.outputRoot).locationOf({ tenant: 'acme', jobId, attempt }), stubbornOutputFile),
  check: ({ harness, job, witnessA, witnessB }) => {
    // Nothing of A's in the output store: only attempt 2's folder, holding B's bytes.
    const jobFolder = join(harness.outputRoot, 'acme', job.id);
    assert.deepEqual(readdirSync(jobFolder), ['2']);
    assert.deepEqual(readdirSync(join(jobFolder, '2')), [stubbornOutputFile]);
    const bytes = readFileSync(folderStore.locationOf(harness, job.id, 2));
    assert.deepEqual(bytes, Buffer.from(witnessB.output), "the stored bytes are B's");
    assert.notDeepEqual(bytes, Buffer.from(witnessA.output));
    return Promise.resolve();
  },
};

describe('a network blip: A is cut off, B runs attempt 2, A finishes late (RabbitMQ)', () => {
  for (const [variant, title] of variants) it(title, () => networkBlip(variant, folderStore));
});
