import { Listeners } from '../core/listeners.js';
import type { BrokerEvent } from './broker.js';

/** The listeners of one broker's `onEvent`. */
export class BrokerEvents extends Listeners<BrokerEvent> {}
