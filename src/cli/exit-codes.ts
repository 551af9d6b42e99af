/**
 * What the exit code of a planrun command says (documented in the README, "Exit codes").
 * The codes above 2 follow sysexits(3), as a job command's exit codes do.
 */
import { fatalExitCode } from '../worker/exit-codes.js';

export const ExitCode = {
  /** The command did what it was asked; a followed job finished. */
  ok: 0,
  /** A job failed (`submit --wait`, `watch`, `submit` of a job that failed at once), a cancel came too late, or the demo saw a promise broken. */
  failed: 1,
  /** A usage error: a bad or missing option or argument, or something the user must fix first (no key, no data, an API that cannot be reached or refuses). */
  usage: 2,
  /** `download`: an output's size or sha256 is not the one its result names (EX_DATAERR); nothing was kept under its name. */
  outputMismatch: 65,
  /** A worker stopped by a Fatal error (or refused by the orchestrator): its supervisor should start a fresh one. */
  workerFatal: fatalExitCode,
  /** Ctrl-C while following a job (128 + SIGINT); the job itself goes on. */
  interrupted: 130,
} as const;
