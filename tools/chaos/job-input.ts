/**
 * The input of the `chaos` job type: each job carries its own misbehaviour, chosen by the
 * seeded plan, so the job code needs no outside state to decide what to do.
 */
export const behaviours = ['ok', 'long', 'permanent', 'transient', 'crash', 'hang', 'over-reserve', 'fatal'] as const;
export type Behaviour = (typeof behaviours)[number];

export interface ChaosInput {
  behaviour: Behaviour;
  /** How long the job works (sleeps, reporting progress) before it ends, ms. */
  runMs: number;
  /** Bytes of the one output file a successful run writes. */
  outputBytes: number;
  /**
   * transient, crash: the attempts before this one fail (so `failUntil` > maxAttempts
   * means every attempt fails and the job ends exhausted). hang, fatal: only attempt 1
   * misbehaves.
   */
  failUntil?: number;
  /** hang: how long attempt 1 blocks, ignoring its abort signal, before it goes on. */
  hangMs?: number;
  /** Makes every job's input (and so its output) distinct. */
  nonce: string;
}

/** The one output file of a successful run. */
export const chaosOutputFile = 'chaos-output.bin';

/** The disk reserve the `chaos` type declares; `over-reserve` jobs write far more than this. */
export const chaosOutputReserveBytes = 64 * 1024;
