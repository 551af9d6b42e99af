/**
 * The dashboard end to end, in a real browser (Debian's chromium driven by playwright-core)
 * against a real `planrun up`: sign in with the printed key, watch a transcode's progress
 * come live to finished, read its attempts, download an output, see the attempt of a worker
 * killed mid-job marked expired, see failed jobs grouped by error code, the fleet, a wrong
 * key and a stopped orchestrator. Every page is saved as a screenshot in .build/screenshots/.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { packageRoot } from '../../test/testing/package-root.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { runCli, startUp, type UpProcess } from '../../test/testing/up-process.js';
import { waitFor } from '../../test/testing/wait.js';

const screenshots = join(packageRoot, '.build', 'screenshots');
const chromiumPath = '/usr/bin/chromium';

// chatty: prints `lines` lines to stdout, `ms` apart, and logs each through ctx.log with its number.
const chattyJobs = `
import { setTimeout as delay } from 'node:timers/promises';
export default [
  { name: 'chatty', async run(ctx) {
    for (let i = 1; i <= ctx.input.lines; i++) {
      console.log('printed line ' + i);
      ctx.log('logged step', { i });
      ctx.progress(i / ctx.input.lines);
      await delay(ctx.input.ms, undefined, { signal: ctx.signal });
    }
    return { data: { lines: ctx.input.lines } };
  } },
];
`;

interface JobAnswer {
  id: string;
  state: string;
  progress: number | null;
  error: { code: string } | null;
  result: { outputFiles?: Record<string, { bytes?: number; sha256?: string }> } | null;
  attempts: Array<{ attempt: number; worker: string; outcome: string | null }>;
}

describe('the dashboard in a browser, against planrun up', () => {
  const dir = tempDir('planrun-dashboard-');
  let up: UpProcess;
  let browser: Browser;
  let page: Page;

  const api = async (path: string, init: RequestInit = {}) => {
    const response = await fetch(`${up.url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${up.key}`, 'content-type': 'application/json', ...init.headers },
    });
    assert.ok(response.ok, `${path}: ${response.status} ${await response.clone().text()}`);
    return response.json();
  };
  const submit = async (input: unknown, type = 'transcode'): Promise<string> =>
    ((await api('/v1/jobs', { method: 'POST', body: JSON.stringify({ type, input }) })) as JobAnswer).id;
  const job = async (id: string): Promise<JobAnswer> => (await api(`/v1/jobs/${id}`)) as JobAnswer;
  const shot = async (name: string) => page.screenshot({ path: join(screenshots, `${name}.png`), fullPage: true });

  before(async () => {
    rmSync(screenshots, { recursive: true, force: true });
    mkdirSync(screenshots, { recursive: true });
    // Short leases and heartbeats: a killed worker's attempt expires in seconds.
    const jobsModule = join(dir.path, 'chatty-jobs.mjs');
    writeFileSync(jobsModule, chattyJobs);
    up = await startUp(
      dir.path,
      ['--jobs', jobsModule, '--slots', '1', '--lease-ttl', '3s', '--heartbeat-interval', '500ms', '--sweep-interval', '250ms'],
      process.env,
      2,
    );
    browser = await chromium.launch({
      executablePath: chromiumPath,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
  });

  after(async () => {
    await browser?.close();
    await up?.stop();
    dir.remove();
    console.log(`dashboard screenshots: ${screenshots}`);
  });

  it('is at the URL planrun up prints', () => {
    assert.match(up.output(), new RegExp(`dashboard ${up.url.replace(/[.]/g, '\\.')}/ `));
  });

  it('refuses a wrong key with a message that says so', async () => {
    await page.goto(up.url);
    await page.fill('input[name=key]', 'not-a-key');
    await page.click('button[type=submit]');
    await page.getByRole('alert').getByText('The orchestrator refused this key').waitFor();
    await shot('sign-in-refused');
  });

  it('signs in with the key planrun up printed and shows a first-run hint on an empty planrun', async () => {
    await page.fill('input[name=key]', up.key);
    await page.click('button[type=submit]');
    await page.getByTestId('first-run').getByText('npx planrun submit transcode').waitFor();
    assert.equal(await page.getByTestId('who').textContent(), 'tenant key');
    await shot('overview-empty');
  });

  let finishedId: string;

  it("shows a transcode's progress live until it finishes, and its attempt on the timeline", async () => {
    finishedId = await submit({ durationSeconds: 4, filter: 'realtime' });
    await page.goto(`${up.url}/jobs/${finishedId}`);
    // The page reads the job once; only its event stream moves the progress afterwards.
    const seen = new Set<string>();
    await waitFor(
      'the job page to show it finished',
      async () => {
        const text = (await page.getByTestId('progress').textContent()) ?? '';
        seen.add(text.trim().split('%')[0]!);
        return (await page.locator('h1 .badge').textContent()) === 'finished';
      },
      60_000,
      100,
    );
    const between = [...seen].map(Number).filter((p) => p > 0 && p < 100);
    assert.ok(between.length >= 2, `progress seen between 0 and 100%: ${[...seen].join(', ')}`);
    await page.locator('[data-testid=timeline] tr[data-attempt="1"][data-outcome="finished"]').waitFor();
    await shot('job-finished');
  });

  it('downloads an output through the API, the bytes the job stored', async () => {
    const { result } = await job(finishedId);
    const [name, file] = Object.entries(result?.outputFiles ?? {})[0] ?? [];
    assert.ok(name && file?.sha256, `the job has an output with its sha256: ${JSON.stringify(result)}`);
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('outputs').getByText(name, { exact: true }).click()]);
    assert.equal(download.suggestedFilename(), name);
    const saved = join(dir.path, `downloaded-${name}`);
    await download.saveAs(saved);
    assert.equal(createHash('sha256').update(readFileSync(saved)).digest('hex'), file.sha256);
  });

  it('marks the attempt of a worker killed mid-job expired, and shows the next attempt', async () => {
    const id = await submit({ durationSeconds: 6, filter: 'realtime' });
    await page.goto(`${up.url}/jobs/${id}`);
    const running = await waitFor(
      'the job to run past 10%',
      async () => {
        const view = await job(id);
        return view.state === 'running' && (view.progress ?? 0) >= 0.1 ? view : undefined;
      },
      60_000,
    );
    const worker = running.attempts.at(-1)!.worker;
    // A worker's id is `<host>-<pid>-<random>` (src/worker/worker.ts): the process to kill.
    process.kill(Number(worker.split('-').at(-2)), 'SIGKILL');
    await page.locator('[data-testid=timeline] tr[data-attempt="1"][data-outcome="expired"]').waitFor({ timeout: 60_000 });
    await page.locator('[data-testid=timeline] tr[data-attempt="2"]').waitFor({ timeout: 60_000 });
    await shot('job-expired-attempt');
    await waitFor('the job to finish on attempt 2', async () => (await job(id)).state === 'finished', 60_000);
    await page.locator('h1 .badge', { hasText: 'finished' }).waitFor({ timeout: 30_000 });
    await shot('job');
  });

  it('groups failed jobs by type and error code', async () => {
    const broken = await Promise.all([0, 1].map((i) => submit({ durationSeconds: 1, filter: `nosuchfilter=${i}` })));
    const failed = await Promise.all(
      broken.map((id) => waitFor(`broken transcode ${id} to fail`, async () => ((await job(id)).state === 'failed' ? job(id) : undefined), 60_000)),
    );
    const code = failed[0]!.error!.code;
    assert.deepEqual(
      failed.map((j) => j.error?.code),
      [code, code],
    );
    await page.goto(`${up.url}/failures`);
    const group = page.locator(`[data-group="transcode/${code}"]`);
    await group.getByTestId('group-count').getByText('2', { exact: true }).waitFor();
    assert.equal(await page.locator('[data-testid=failure-groups] tbody tr').count(), 1);
    await shot('failures');
  });

  it('shows the fleet: both workers, their slots and heartbeats', async () => {
    await page.goto(`${up.url}/fleet`);
    await waitFor('two workers heard from lately', async () => (await page.locator('[data-testid=fleet] tbody tr:not(.quiet)').count()) === 2, 30_000);
    await shot('fleet');
  });

  it('shows counts, throughput and fleet use on the overview', async () => {
    await page.goto(up.url);
    await page.getByTestId('count-finished').getByText('2', { exact: true }).waitFor();
    await page.getByTestId('count-failed').getByText('2', { exact: true }).waitFor();
    await page
      .getByTestId('fleet-utilisation')
      .getByText(/^0 \/ \d+$/)
      .waitFor();
    await page.getByTestId('oldest-queued').getByText('—').waitFor();
    // Jobs ended per minute, and queued and running over time.
    assert.equal(await page.locator('.chart canvas').count(), 2);
    await shot('overview');
  });

  it("shows every tenant's jobs to an admin key, with a tenant filter", async () => {
    const created = await runCli(['keys', 'create', '--admin'], dir.path);
    assert.equal(created.status, 0, created.stderr);
    const adminKey = created.stdout.trim().split('\n').at(-1)!;
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.fill('input[name=key]', adminKey);
    await page.click('button[type=submit]');
    await page.getByTestId('who').getByText('admin: every tenant').waitFor();
    await page.getByRole('link', { name: 'Jobs' }).click();
    await page.locator('input[name=tenant]').waitFor();
    await waitFor('the jobs listed with their tenant', async () => (await page.locator('[data-testid=jobs-table] tbody tr[data-job]').count()) === 4, 30_000);
    assert.equal(await page.locator('[data-testid=jobs-table] thead th', { hasText: 'tenant' }).count(), 1);
    await page.fill('input[name=tenant]', 'nobody');
    await page.locator('input[name=tenant]').blur();
    await page.getByText('No jobs match.').waitFor();
    await shot('jobs-admin');
  });

  it("follows a running job's log live, and reads it whole once it ended", async () => {
    const id = await submit({ lines: 40, ms: 100 }, 'chatty');
    await page.goto(`${up.url}/jobs/${id}`);
    const logs = page.getByTestId('logs');
    await logs.getByText('(following)').waitFor();
    await logs.getByText('printed line 5', { exact: true }).waitFor();
    assert.notEqual((await job(id)).state, 'finished', 'the lines came while the job ran');
    await page.locator('h1 .badge', { hasText: 'finished' }).waitFor({ timeout: 30_000 });
    await logs.getByText('printed line 40', { exact: true }).waitFor();
    await logs.getByText('logged step {"i":40}').waitFor();
    await shot('job-logs');
  });

  it('bulk-redrives a failure group with one click, after a confirmation naming how many', async () => {
    await page.goto(`${up.url}/failures`);
    const group = page.locator('[data-testid=failure-groups] tbody tr').first();
    await group.getByTestId('group-count').getByText('2', { exact: true }).waitFor();
    await group.getByTestId('redrive').click();
    await group.getByTestId('confirm-redrive').getByText('Redrive 2 jobs').click();
    await page
      .getByTestId('redriven')
      .getByText(/^2 redriven from transcode/)
      .waitFor();
    await shot('failures-redriven');
  });

  it('retries a failed job from its page, and links the two both ways', async () => {
    // A job the bulk redrive made, once it has failed in its turn: the holding area's sample
    // (the jobs redriven before it are retried already, and answer their retry instead).
    let failed = { id: '' };
    await waitFor(
      'a redriven job to fail again',
      async () => {
        const { groups } = (await api('/v1/failures')) as { groups: Array<{ sampleJobId?: string }> };
        failed = { id: groups[0]?.sampleJobId ?? '' };
        return failed.id !== '';
      },
      60_000,
    );
    await page.goto(`${up.url}/jobs/${failed.id}`);
    await page.getByTestId('retry').click();
    const retryOf = page.getByTestId('retry-of');
    await retryOf.getByText(failed.id).waitFor();
    const newId = (await page.getByTestId('job-id').textContent())!;
    assert.notEqual(newId, failed.id);
    await retryOf.click();
    await page.getByTestId('retried-by').getByText(newId).waitFor();
    await shot('job-retried');
  });

  it('keeps a client route on reload, and shows a banner while the orchestrator is down', async () => {
    await page.goto(`${up.url}/jobs?state=finished`);
    await waitFor('the three finished jobs listed', async () => (await page.locator('[data-testid=jobs-table] tbody tr[data-job]').count()) === 3, 30_000);
    await shot('jobs');
    await up.stop();
    await page.getByTestId('unreachable').waitFor({ timeout: 30_000 });
    await shot('orchestrator-down');
  });
});
