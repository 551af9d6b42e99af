import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { tempDir } from '../../test/testing/temp-dir.js';
import { loadTenantMap, tenantOfUser } from './submit-tenant.js';

const dir = tempDir('planrun-tenant-map-');
after(() => dir.remove());

function mapFile(text: string): string {
  const path = join(dir.path, `map-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, text);
  return path;
}

describe('the tenant of a broker user', () => {
  it('is the user name without a map, when that name can be a tenant', () => {
    assert.deepEqual(tenantOfUser({ from: 'user-id' }, 'acme'), { tenant: 'acme' });
    assert.match((tenantOfUser({ from: 'user-id' }, 'acme@corp') as { problem: string }).problem, /broker user "acme@corp" cannot be a tenant/);
  });

  it('comes from the map when there is one; a user not in it has none', () => {
    const source = { from: 'user-id' as const, tenantMap: loadTenantMap(mapFile('{"acme-app": "acme"}')) };
    assert.deepEqual(tenantOfUser(source, 'acme-app'), { tenant: 'acme' });
    assert.match((tenantOfUser(source, 'globex-app') as { problem: string }).problem, /"globex-app" is not in the tenant map/);
  });

  it('is missing without user_id', () => {
    for (const userId of [undefined, ''])
      assert.match((tenantOfUser({ from: 'user-id' }, userId) as { problem: string }).problem, /user_id property must be set/);
  });

  it('a tenant map that is not a JSON object of valid tenant names is refused, saying why', () => {
    const cases: Array<[string, RegExp]> = [
      ['not json', /tenant map .*: Unexpected token/],
      ['["acme"]', /expected a JSON object from broker user to tenant/],
      ['{"a": 1}', /the tenant of "a" must be a string/],
      ['{"a": "no.dots"}', /the tenant of "a": tenant name "no.dots" must start with a letter/],
    ];
    for (const [text, message] of cases) assert.throws(() => loadTenantMap(mapFile(text)), message);
    assert.throws(() => loadTenantMap(join(dir.path, 'nosuch.json')), /tenant map .*nosuch\.json: ENOENT/);
  });
});
