import { join } from 'node:path';
import { after } from 'node:test';

import { tempDir } from '../../../test/testing/temp-dir.js';
import { ledgerConformance } from '../../../test/ledger/conformance/index.js';
import { ledgerProperties } from '../../../test/ledger/property/index.js';
import type { LedgerFactory } from '../../../test/ledger/testing.js';
import { openSqliteLedger } from './sqlite-ledger.js';

// One temp folder for the file; every ledger gets a fresh database file in it.
const dir = tempDir('planrun-sqlite-ledger-');
after(() => dir.remove());

let databases = 0;
const factory: LedgerFactory = ({ clock, config }) => {
  databases += 1;
  const path = join(dir.path, `ledger-${databases}.db`);
  return openSqliteLedger(config === undefined ? { path, clock } : { path, clock, config });
};

ledgerConformance('sqlite', factory);
ledgerProperties('sqlite', factory);
