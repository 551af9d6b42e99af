import { EmbeddedBroker } from '../broker/embedded.js';
import { apiBehaviour } from '../../test/api/api-behaviour.js';

apiBehaviour('the embedded broker', async () => {
  const broker = new EmbeddedBroker();
  return { connect: async () => broker.connect(), close: () => broker.close() };
});
