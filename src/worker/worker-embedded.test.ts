import { EmbeddedBroker } from '../broker/embedded.js';
import { workerBehaviour } from '../../test/worker/behaviour.js';

workerBehaviour('the embedded broker', async () => {
  const broker = new EmbeddedBroker();
  return { connect: async () => broker.connect(), close: () => broker.close() };
});
