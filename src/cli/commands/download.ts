import { relative } from 'node:path';
import type { Command } from 'commander';
import { clientFor, clientOptions, talkingToApi, type ClientFlags } from '../client-options.js';

interface DownloadFlags extends ClientFlags {
  out: string;
  json?: boolean;
}

export function registerDownloadCommand(program: Command): void {
  clientOptions(
    program
      .command('download')
      .description(
        "fetch every output of a finished job into a folder (from the object store, or the orchestrator's output folder), " +
          'checking each size and sha256 against the result; a mismatch keeps nothing and exits 65',
      )
      .argument('<id>', 'the job id')
      .option('--out <dir>', 'where to write the outputs', '.')
      .option('--json', 'print what was written as JSON (name, path, bytes, sha256, verified)'),
  ).action(async (id: string, flags: DownloadFlags) => {
    const client = clientFor(flags);
    const written = await talkingToApi(flags, () => client.download(id, { outDir: flags.out }));
    if (flags.json) {
      console.log(JSON.stringify(written, null, 2));
      return;
    }
    if (written.length === 0) console.log(`job ${id} has no outputs`);
    for (const file of written) {
      const checked = file.verified ? 'verified' : 'not verified: the result names no sha256';
      console.log(`${relative(process.cwd(), file.path) || file.path}  ${file.bytes} bytes  sha256 ${file.sha256}  (${checked})`);
    }
  });
}
