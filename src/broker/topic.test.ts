import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { topicMatches } from './topic.js';

describe('topicMatches', () => {
  const cases: Array<[pattern: string, key: string, matches: boolean]> = [
    ['a.b.c', 'a.b.c', true],
    ['a.b.c', 'a.b', false],
    ['a.*.finished', 'a.x.finished', true],
    ['a.*.finished', 'a.finished', false],
    ['a.*.finished', 'a.x.y.finished', false],
    ['a.#', 'a', true],
    ['a.#', 'a.x.y.z', true],
    ['a.#', 'b.x', false],
    ['#', 'anything.at.all', true],
    ['#', '', true],
    ['#.finished', 't1.render.finished', true],
    ['#.finished', 't1.render.failed', false],
    ['a.#.z', 'a.z', true],
    ['a.#.z', 'a.b.c.z', true],
    ['a.#.z', 'a.b.c', false],
    ['*.*', 'a.b', true],
    ['*', 'a.b', false],
    ['#.#', 'a.b', true],
  ];
  for (const [pattern, key, matches] of cases) {
    it(`${pattern} ${matches ? 'matches' : 'does not match'} "${key}"`, () => {
      assert.equal(topicMatches(pattern, key), matches);
    });
  }
});
