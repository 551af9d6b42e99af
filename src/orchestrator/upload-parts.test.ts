import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkedPartSize, defaultPartSize, maxPartSize, minPartSize, planParts } from './upload-parts.js';

const MiB = 1024 * 1024;

describe('cutting an output into the parts of a multipart upload', () => {
  it('cuts parts of the part size, the last one shorter, covering every byte once', () => {
    assert.deepEqual(planParts(11 * MiB + 7, 5 * MiB), [
      { partNumber: 1, start: 0, end: 5 * MiB - 1 },
      { partNumber: 2, start: 5 * MiB, end: 10 * MiB - 1 },
      { partNumber: 3, start: 10 * MiB, end: 11 * MiB + 6 },
    ]);
    assert.deepEqual(planParts(10 * MiB, 5 * MiB).at(-1), { partNumber: 2, start: 5 * MiB, end: 10 * MiB - 1 });
  });

  it('grows the parts to a whole MiB when the file would need more than 10,000 of them', () => {
    const bytes = 1024 * 1024 * MiB + 1; // 1 TiB and a byte
    const parts = planParts(bytes, defaultPartSize);
    assert.ok(parts.length <= 10_000, `${parts.length} parts`);
    const size = parts[0]!.end + 1;
    assert.equal(size % MiB, 0);
    assert.ok(size > defaultPartSize);
    assert.equal(parts.at(-1)!.end, bytes - 1);
    assert.ok(parts.every((part, i) => i === 0 || part.start === parts[i - 1]!.end + 1));
    assert.equal(planParts(10_000 * 5 * MiB, 5 * MiB).length, 10_000, 'exactly 10,000 parts need no growth');
  });

  it('accepts part sizes S3 accepts, 5 MiB to 5 GiB, and refuses the others', () => {
    assert.equal(checkedPartSize(minPartSize), minPartSize);
    assert.equal(checkedPartSize(maxPartSize), maxPartSize);
    assert.throws(() => checkedPartSize(minPartSize - 1), /between 5 MiB and 5 GiB/);
    assert.throws(() => checkedPartSize(maxPartSize + 1), /between 5 MiB and 5 GiB/);
  });
});
