/**
 * A PostgreSQL server of the test's own: `initdb` in a folder, `pg_ctl start` on a free
 * port of 127.0.0.1 with its socket in that folder, trust authentication for the user
 * `postgres`. A test (or the chaos run) may stop, restart or kill it without touching the
 * shared server on 5432. Run as root, every command runs as the `postgres` user
 * (`runuser`) on a folder that user owns, since PostgreSQL refuses to run as root.
 *
 * Its folder is one of its own under the system's temp folder (a test's own temp folder is
 * closed to other users), removed by `stop`. Whoever starts it stops it, also when the
 * test fails.
 */
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './free-port.js';

const runAs = 'postgres';

export class PrivatePostgres {
  private readonly dataDir: string;

  private constructor(
    private readonly dir: string,
    readonly port: number,
  ) {
    this.dataDir = join(dir, 'data');
  }

  /** Makes a fresh cluster and starts it; if that fails, removes what it made. */
  static async start(): Promise<PrivatePostgres> {
    const dir = mkdtempSync(join(tmpdir(), 'planrun-pg-'));
    if (process.getuid?.() === 0) chownSync(dir, ...postgresIds());
    const server = new PrivatePostgres(dir, await freePort());
    try {
      await server.tool('initdb', ['-D', server.dataDir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'], 120_000);
      await server.begin();
    } catch (error) {
      await server.stop();
      throw error;
    }
    return server;
  }

  /** A URL for `database` (default `postgres`). */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** The postmaster's pid while it runs (its first line of postmaster.pid). */
  pid(): number | undefined {
    try {
      const pid = Number(readFileSync(join(this.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  /** `pg_ctl restart -m fast`: every connection is cut, the server is back when this returns. */
  async restart(): Promise<void> {
    await this.tool('pg_ctl', ['-D', this.dataDir, '-w', '-t', '60', '-m', 'fast', '-o', this.serverOptions(), '-l', this.logFile, 'restart'], 90_000);
  }

  /** Stops it for good (`-m immediate`: nothing to keep) and removes its folder; never throws. */
  async stop(): Promise<void> {
    if (this.pid() !== undefined) {
      await this.tool('pg_ctl', ['-D', this.dataDir, '-w', '-t', '30', '-m', 'immediate', 'stop'], 60_000).catch(() => {
        const pid = this.pid();
        if (pid !== undefined) process.kill(pid, 'SIGKILL');
      });
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private get logFile(): string {
    return join(this.dir, 'postgres.log');
  }

  private async begin(): Promise<void> {
    await this.tool('pg_ctl', ['-D', this.dataDir, '-w', '-t', '60', '-o', this.serverOptions(), '-l', this.logFile, 'start'], 90_000);
  }

  /** Its own port, its socket in its own folder, loopback only; fsync off (a test's data need not survive a power cut). */
  private serverOptions(): string {
    return `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  }

  private tool(name: string, args: string[], timeoutMs: number): Promise<string> {
    const file = join(binDir(), name);
    const [command, commandArgs] = process.getuid?.() === 0 ? ['runuser', ['-u', runAs, '--', file, ...args]] : [file, args];
    return new Promise((resolve, reject) => {
      execFile(command, commandArgs, { timeout: timeoutMs }, (error, stdout, stderr) => {
        if (error) reject(new Error(`${name} ${args.join(' ')} failed: ${error.message}\n${stderr}`.trim()));
        else resolve(stdout);
      });
    });
  }
}

/** PostgreSQL's programs: PLANRUN_TEST_POSTGRES_BIN, else the newest of Debian's /usr/lib/postgresql/N/bin. */
function binDir(): string {
  const override = process.env.PLANRUN_TEST_POSTGRES_BIN;
  if (override) return override;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0) throw new Error('no PostgreSQL server programs found (apt-get install postgresql, or set PLANRUN_TEST_POSTGRES_BIN)');
  return join(root, versions[0]!, 'bin');
}

function postgresIds(): [number, number] {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${runAs}:`));
  if (!line) throw new Error(`no user ${runAs} on this machine to run PostgreSQL as`);
  const [, , uid, gid] = line.split(':');
  return [Number(uid), Number(gid)];
}
