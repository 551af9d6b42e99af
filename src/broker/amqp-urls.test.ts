import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAmqpUrls, redactedList } from './amqp-urls.js';

describe('parseAmqpUrls', () => {
  it('takes one URL as it is', () => {
    assert.deepEqual(parseAmqpUrls('amqp://guest:guest@127.0.0.1:5672/vh?frameMax=8192'), ['amqp://guest:guest@127.0.0.1:5672/vh?frameMax=8192']);
  });

  it('gives every host of one URL its credentials, vhost and query', () => {
    assert.deepEqual(parseAmqpUrls('amqp://u:p@a:5672,b:5673,c/vh?heartbeat=5'), [
      'amqp://u:p@a:5672/vh?heartbeat=5',
      'amqp://u:p@b:5673/vh?heartbeat=5',
      'amqp://u:p@c/vh?heartbeat=5',
    ]);
  });

  it('takes whole URLs separated by commas, and mixes of both', () => {
    assert.deepEqual(parseAmqpUrls('amqp://u:p@a:1, amqps://v:q@b:2,c:3/x'), ['amqp://u:p@a:1', 'amqps://v:q@b:2/x', 'amqps://v:q@c:3/x']);
  });

  it('keeps a comma written %2C inside a password', () => {
    assert.deepEqual(parseAmqpUrls('amqp://u:p%2Cw@a,b'), ['amqp://u:p%2Cw@a', 'amqp://u:p%2Cw@b']);
  });

  it('refuses lists it cannot read, without showing the password', () => {
    for (const [spec, message] of [
      ['a:5672,amqp://u:secret@b', /must start with amqp:\/\//],
      ['amqp://u:secret@a,,b', /empty address/],
      ['amqp://u:secret@a/vh,b', /only the last host may be followed by a vhost/],
      ['http://u:secret@a', /not an amqp:\/\/ or amqps:\/\/ URL/],
    ] as const) {
      assert.throws(
        () => parseAmqpUrls(spec),
        (error: Error) => message.test(error.message) && !error.message.includes('secret'),
        spec,
      );
    }
  });

  it('redacts every password of a list', () => {
    assert.equal(redactedList('amqp://u:secret@a,b:2,amqp://v:other@c'), 'amqp://u:***@a,b:2,amqp://v:***@c');
  });
});
