import { after } from 'node:test';

import { ledgerConformance } from '../../../test/ledger/conformance/index.js';
import { ledgerProperties } from '../../../test/ledger/property/index.js';
import { TestSchemas } from '../../../test/ledger/postgres/testing.js';

// Every ledger gets a schema of its own in the shared `test` database, dropped on close.
const schemas = new TestSchemas();
after(() => schemas.dropAll());

ledgerConformance('postgres', schemas.factory);
ledgerProperties('postgres', schemas.factory);
