import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EmbeddedBroker } from '../broker/embedded.js';
import { instrumentEnv, loadInstrument } from './instrument.js';

const moduleUrl = (code: string) => `data:text/javascript,${encodeURIComponent(code)}`;

test('no PLANRUN_INSTRUMENT, no instrument', async () => {
  assert.equal(await loadInstrument({}), undefined);
  assert.equal(await loadInstrument({ [instrumentEnv]: '' }), undefined);
});

test('the module PLANRUN_INSTRUMENT names wraps the broker and watches the worker', async () => {
  const instrument = await loadInstrument({
    [instrumentEnv]: moduleUrl(`
      export const seen = [];
      export function wrapBroker(broker, role) { seen.push(role); return { wrapped: broker }; }
      export function watchWorker(worker) { seen.push(worker.id); }
    `),
  });
  assert.ok(instrument?.wrapBroker && instrument.watchWorker);
  const embedded = new EmbeddedBroker();
  const broker = embedded.connect();
  assert.deepEqual(instrument.wrapBroker(broker, 'worker'), { wrapped: broker });
  instrument.watchWorker({ id: 'w1', onEvent: () => () => undefined });
  assert.deepEqual((instrument as unknown as { seen: string[] }).seen, ['worker', 'w1']);
  await broker.close();
  await embedded.close();
});

test('a module that is no instrument, or does not load, stops the command with what is wrong', async () => {
  await assert.rejects(
    loadInstrument({ [instrumentEnv]: moduleUrl('export const x = 1;') }),
    /is no instrument: it exports neither wrapBroker nor watchWorker/,
  );
  await assert.rejects(loadInstrument({ [instrumentEnv]: moduleUrl('export const wrapBroker = 1;') }), /is no instrument: wrapBroker is not a function/);
  await assert.rejects(
    loadInstrument({ [instrumentEnv]: '/nonexistent/instrument.js' }),
    /cannot load the PLANRUN_INSTRUMENT module \/nonexistent\/instrument\.js/,
  );
});
