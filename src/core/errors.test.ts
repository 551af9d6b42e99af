/**
 * The stack of an error of no class travels with it, bounded at every step that takes one
 * from outside: where job code threw it, on the control protocol, and in the ledger.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { controlRequest } from '../control/protocol.js';
import { recordableError } from '../ledger/shared/input-validation.js';
import { boundedStack, MAX_ERROR_STACK_LENGTH, PermanentError, serializeError } from './errors.js';

const long = `Error: deep\n${'    at f (file:///jobs.js:1:1)\n'.repeat(500)}`;

describe('error stacks', () => {
  it('an error of no class keeps its stack; a planrun error, whose class and code say it all, does not', () => {
    const plain = serializeError(new TypeError('oops'));
    assert.deepEqual([plain.class, plain.code, plain.message], ['transient', 'unclassified', 'oops']);
    assert.match(plain.stack ?? '', /^TypeError: oops\n\s+at /);
    assert.equal('stack' in serializeError(new PermanentError('bad_input', 'no')), false);
    assert.equal('stack' in serializeError('a string thrown'), false);
  });

  it('a stack is cut to its first MAX_ERROR_STACK_LENGTH characters, saying so; a short one is kept as is', () => {
    const cut = boundedStack(long);
    assert.equal(cut.length, MAX_ERROR_STACK_LENGTH);
    assert.ok(long.startsWith(cut.slice(0, cut.lastIndexOf('\n'))));
    assert.match(cut, /cut at 4096 characters\]$/);
    assert.equal(boundedStack(cut), cut);
    assert.equal(boundedStack('Error: short'), 'Error: short');
    // Never half of a surrogate pair.
    const emoji = boundedStack('😀'.repeat(MAX_ERROR_STACK_LENGTH));
    assert.equal(emoji.length <= MAX_ERROR_STACK_LENGTH, true);
    assert.doesNotMatch(emoji, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
  });

  it('the stack of an error already serialised elsewhere (a job process) is kept, bounded', () => {
    const relayed = serializeError({ class: 'transient', code: 'unclassified', message: 'oops', stack: long });
    assert.equal(relayed.stack?.length, MAX_ERROR_STACK_LENGTH);
  });

  it('the control protocol cuts a stack rather than refusing the settle', () => {
    const settle = controlRequest.parse({
      op: 'settle',
      jobId: 'j1',
      attempt: 1,
      token: 't',
      tenant: 'acme',
      outcome: { kind: 'failed', error: { class: 'transient', code: 'unclassified', message: 'oops', stack: long } },
    });
    assert.ok(settle.op === 'settle' && settle.outcome.kind === 'failed');
    assert.equal(settle.outcome.error.stack?.length, MAX_ERROR_STACK_LENGTH);
  });

  it('the ledger keeps a bounded stack, its NULs replaced like those of the message', () => {
    const recorded = recordableError({ class: 'transient', code: 'unclassified', message: 'a\u0000b', stack: `Error: a\u0000b\n${long}` });
    assert.equal(recorded.message, 'a\uFFFDb');
    assert.equal(recorded.stack?.length, MAX_ERROR_STACK_LENGTH);
    assert.ok(recorded.stack?.startsWith('Error: a\uFFFDb\n'));
    const clean = { class: 'transient', code: 'unclassified', message: 'oops', stack: 'Error: oops' } as const;
    assert.equal(recordableError(clean), clean);
  });
});
