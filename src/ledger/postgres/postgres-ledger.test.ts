import { after } from 'node:test';

import { ledgerConformance } from '../conformance.js';
import { ledgerProperties } from '../property.js';
import { TestSchemas } from './testing.js';

// Every ledger gets a schema of its own in the shared `test` database, dropped on close.
const schemas = new TestSchemas();
after(() => schemas.dropAll());

ledgerConformance('postgres', schemas.factory);
ledgerProperties('postgres', schemas.factory);
