import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { uploadProgressMessage } from './upload-progress.js';

const MiB = 1024 * 1024;

describe('the upload progress message', () => {
  it('says how far the upload is in MiB: whole ones for a large upload, tenths for a smaller one', () => {
    assert.equal(uploadProgressMessage(340 * MiB + 5, 1024 * MiB), 'uploading outputs 340/1024 MiB');
    assert.equal(uploadProgressMessage(3.25 * MiB, 12 * MiB), 'uploading outputs 3.3/12.0 MiB');
    assert.equal(uploadProgressMessage(12 * MiB, 12 * MiB), 'uploading outputs 12.0/12.0 MiB');
  });
});
