/**
 * docs/grafana-dashboard.json is a Grafana dashboard built on the orchestrator's metrics:
 * every panel queries Prometheus, and every metric a query names is one `GET /metrics`
 * serves (its `# TYPE` line: a histogram's `_bucket` series is its own name's).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { call, withEmbeddedApi } from '../../test/api/fixture.js';
import { packageRoot } from '../../test/testing/package-root.js';

interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource: { type: string; uid: string };
  targets: Array<{ refId: string; expr: string }>;
}

const dashboard = JSON.parse(readFileSync(join(packageRoot, 'docs', 'grafana-dashboard.json'), 'utf8')) as {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string }> };
};

describe('the Grafana dashboard in docs/', () => {
  it('is a dashboard Grafana imports: a uid, a title, panels on the grid, each with Prometheus queries over the datasource variable', () => {
    assert.match(dashboard.uid, /^[\w-]{1,40}$/);
    assert.ok(dashboard.title.length > 0);
    assert.ok(Number.isInteger(dashboard.schemaVersion) && dashboard.schemaVersion >= 30);
    assert.ok(dashboard.templating.list.some((v) => v.name === 'datasource' && v.type === 'datasource'));
    assert.ok(dashboard.panels.length >= 8);
    assert.equal(new Set(dashboard.panels.map((p) => p.id)).size, dashboard.panels.length, 'panel ids are unique');
    for (const panel of dashboard.panels) {
      assert.ok(panel.type && panel.title, `panel ${panel.id} has a type and a title`);
      const { x, y, w, h } = panel.gridPos;
      assert.ok(x >= 0 && x + w <= 24 && y >= 0 && h > 0, `panel ${panel.title} fits the 24-column grid`);
      assert.deepEqual(panel.datasource, { type: 'prometheus', uid: '${datasource}' });
      assert.ok(panel.targets.length > 0, `panel ${panel.title} queries something`);
      for (const target of panel.targets) assert.match(target.expr, /planrun_/);
    }
  });

  it('queries only metrics that GET /metrics serves, the per-type gauges and latency histograms among them', () =>
    withEmbeddedApi(async (api) => {
      const metrics = await call(api.app, 'GET', '/metrics', { key: api.adminKey });
      assert.equal(metrics.status, 200);
      const served = new Set([...String(metrics.body).matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
      const queried = new Set(dashboard.panels.flatMap((p) => p.targets.flatMap((t) => [...t.expr.matchAll(/\bplanrun_\w+/g)].map((m) => m[0]))));
      for (const name of ['planrun_queued_jobs', 'planrun_running_jobs', 'planrun_oldest_queued_age_seconds', 'planrun_submit_to_start_seconds_bucket']) {
        assert.ok(queried.has(name), `the dashboard shows ${name}`);
      }
      for (const name of queried) {
        const family = name.replace(/_(bucket|sum|count)$/, '');
        assert.ok(served.has(name) || served.has(family), `${name} is served by /metrics`);
      }
    }));
});
