/**
 * Issue 13's attack table: `planrun up` runs the `hostile` job types under each sandbox
 * (none, --job-user nobody, --sandbox bwrap, both), and every attack reports whether it
 * got what it was after. The test prints the table docs/security.md shows, and asserts
 * that under bubblewrap every attack fails, and as another user every attack that a user
 * boundary can stop.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { Client } from '../client/client.js';
import { packageRoot } from '../../test/testing/package-root.js';
import { tempDir } from '../../test/testing/temp-dir.js';
import { startUp, type UpProcess } from '../../test/testing/up-process.js';
import type { AttackReport, ProbeInput } from '../../test/worker/runner/fixtures/hostile-jobs.js';
import { attackNames } from '../../test/worker/runner/fixtures/hostile-jobs.js';

const HOSTILE_JOBS = fileURLToPath(new URL('../../test/worker/runner/fixtures/hostile-jobs.js', import.meta.url));
// The same attacks as a command job in shell (docs/job-protocol.md).
const HOSTILE_SHELL_JOBS = join(packageRoot, 'test', 'worker', 'runner', 'fixtures', 'hostile-shell', 'jobs.json');
const SHELL = ' (shell job)';
const PLANTED_VALUE = `planted-${process.pid}`;

const modes = [
  { label: 'none', args: [] },
  { label: 'job-user', args: ['--job-user', 'nobody'] },
  { label: 'bwrap', args: ['--sandbox', 'bwrap'] },
  { label: 'bwrap + job-user', args: ['--sandbox', 'bwrap', '--job-user', 'nobody'] },
] as const;
type Mode = (typeof modes)[number]['label'];

// What a user boundary alone cannot stop: command lines are world-readable, the network and
// /tmp are shared, and every job runs as the same job user.
const NOT_FOR_JOB_USER = new Set([
  "read the worker's /proc/<pid>/cmdline",
  'connect to the broker over TCP',
  "read another job's scratch folder",
  "write into the machine's shared /tmp",
]);

const LIMIT_ROWS = [
  'fork-bomb (200 processes, limit 64)',
  'exhaust memory (256 MB, limit 128 MB)',
  'fill the scratch disk (256 MiB, reserve 4 MiB)',
  'run past its timeout (1 s)',
] as const;

/** attack -> mode -> what happened. */
const table = new Map<string, Map<Mode, string>>();

function record(attack: string, mode: Mode, outcome: string): void {
  if (!table.has(attack)) table.set(attack, new Map());
  table.get(attack)!.set(mode, outcome);
}

/** A write counts where the worker's files are: a sandbox's private /tmp or root does not. */
function onHost(report: AttackReport): AttackReport {
  if (report.written === undefined) return report;
  const landed = report.written.filter((file) => existsSync(file));
  for (const file of landed) rmSync(file);
  const privately = report.written.filter((file) => !landed.includes(file));
  if (landed.length > 0) return { succeeded: true, detail: `wrote in ${landed.map((file) => dirname(file)).join(', ')}` };
  return { succeeded: false, detail: privately.length > 0 ? "only into the sandbox's own private file system" : report.detail };
}

async function settled(client: Client, id: string): Promise<{ ok: boolean; data: unknown; error: string }> {
  const job = await client.wait(id);
  return { ok: job.state === 'finished', data: job.result?.data, error: job.error ? `${job.error.class} ${job.error.code}` : job.state };
}

describe('hostile jobs under each sandbox', () => {
  after(() => {
    const header = `| attack | ${modes.map((mode) => mode.label).join(' | ')} |`;
    const lines = [header, `|---|${modes.map(() => '---').join('|')}|`];
    for (const [attack, byMode] of table) lines.push(`| ${attack} | ${modes.map((mode) => byMode.get(mode.label) ?? '?').join(' | ')} |`);
    console.log(`\nAttack table (docs/security.md):\n${lines.join('\n')}\n`);
  });

  for (const mode of modes) {
    describe(`sandbox ${mode.label}`, () => {
      const dir = tempDir('planrun-hostile-');
      let up: UpProcess | undefined;
      after(async () => {
        await up?.stop();
        dir.remove();
      });

      test('every attack is tried and reported', async () => {
        const env = { ...process.env, HOSTILE_PLANTED_SECRET: PLANTED_VALUE };
        up = await startUp(dir.path, ['--jobs', HOSTILE_JOBS, '--jobs', HOSTILE_SHELL_JOBS, '--slots', '2', ...mode.args], env);
        assert.match(up.output(), new RegExp(`sandbox +${mode.label === 'job-user' ? 'none' : mode.label.split(' ')[0]}`));
        assert.match(up.output(), /limits +memory: cgroup v1 per job; processes: cgroup v1 per job; scratch reserve watched every 200 ms/);
        const dataDir = join(dir.path, '.planrun');
        const plantedOutput = join(dataDir, 'outputs', 'planted', 'secret.txt');
        mkdirSync(join(dataDir, 'outputs', 'planted'), { recursive: true });
        writeFileSync(plantedOutput, 'hostile-marker: another job stored this');
        const client = new Client({ url: up.url, key: up.key });

        const input: ProbeInput = {
          dataDir,
          plantedEnv: 'HOSTILE_PLANTED_SECRET',
          plantedValue: PLANTED_VALUE,
          plantedOutput,
          brokerPort: 5672,
          peerWaitMs: 1500,
        };
        // Two at once, so that each has another job's scratch folder to go for; the Node probes, then the shell ones.
        for (const [probeType, suffix] of [
          ['hostile-probe', ''],
          ['hostile-shell-probe', SHELL],
        ] as const) {
          const probes = await Promise.all([1, 2].map(() => client.submit(probeType, input, { maxAttempts: 1 })));
          const reports = await Promise.all(probes.map(async ({ id }) => settled(client, id)));
          for (const report of reports) assert.ok(report.ok, `the ${probeType} job failed: ${report.error}`);
          for (const attack of attackNames) {
            const results = reports.map((report) => onHost((report.data as { reports: Record<string, AttackReport> }).reports[attack]!));
            const succeeded = results.find((result) => result.succeeded);
            record(attack + suffix, mode.label, succeeded ? `**got it** (${succeeded.detail})` : `failed (${results[0]!.detail})`);
          }
        }

        const limited = await Promise.all([
          client.submit('hostile-fork', { count: 200 }, { maxAttempts: 1 }),
          client.submit('hostile-memory', { mb: 256 }, { maxAttempts: 1 }),
          client.submit('hostile-disk', { mb: 256 }, { maxAttempts: 1 }),
          client.submit('hostile-overrun', null, { maxAttempts: 1 }),
        ]);
        const limitedShell = await Promise.all([
          client.submit('hostile-shell-fork', null, { maxAttempts: 1 }),
          client.submit('hostile-shell-disk', null, { maxAttempts: 1 }),
          client.submit('hostile-shell-overrun', null, { maxAttempts: 1 }),
        ]);
        const outcomes = await Promise.all([...limited, ...limitedShell].map(async ({ id }) => settled(client, id)));
        [...LIMIT_ROWS, `${LIMIT_ROWS[0]}${SHELL}`, `${LIMIT_ROWS[2]}${SHELL}`, `${LIMIT_ROWS[3]}${SHELL}`].forEach((row, index) => {
          const outcome = outcomes[index]!;
          record(row, mode.label, outcome.ok ? `**got it** (${JSON.stringify(outcome.data)})` : `failed: job ended ${outcome.error}`);
        });
        assert.deepEqual(
          outcomes.map((outcome) => outcome.error),
          [
            'permanent resource_limit',
            'permanent resource_limit',
            'permanent resource_limit',
            'transient timeout',
            'permanent resource_limit',
            'permanent resource_limit',
            'transient timeout',
          ],
          'every limit ends its job, in every mode, Node or shell',
        );

        // No sandbox holds back a secret the worker has in its environment, none lets a job hand one out.
        for (const suffix of ['', SHELL]) {
          assert.match(table.get(`read a planted secret from the environment${suffix}`)!.get(mode.label)!, /^failed/);
          if (mode.label.startsWith('bwrap') || mode.label === 'job-user') {
            for (const attack of attackNames) {
              if (mode.label === 'job-user' && NOT_FOR_JOB_USER.has(attack)) continue;
              assert.match(table.get(attack + suffix)!.get(mode.label)!, /^failed/, `${attack}${suffix} under ${mode.label}`);
            }
          }
        }
      });
    });
  }
});
