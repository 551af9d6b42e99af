import { existsSync } from 'node:fs';
import { ownCgroupDir, type CgroupLimits } from './job-cgroup.js';
import type { ProcessLimits } from './sandbox.js';

/**
 * Which mechanism holds each kind of limit of a job on this machine, decided once per
 * worker and said out loud (`planrun up` prints it, a worker logs it): a limit nothing can
 * hold is refused, never passed over.
 *
 * - A cgroup of the job's own (job-cgroup.ts), where this machine gives the worker a
 *   writable cgroup v1 hierarchy for it: it counts every process of the job together, and
 *   tells when it stopped one, so the job ends Permanent `resource_limit`.
 * - Else setrlimit, through prlimit (sandbox.ts): memory as RLIMIT_DATA of each process
 *   (not the job's processes together), processes as RLIMIT_NPROC, which counts every
 *   process of a user and holds nothing for root, so only with `--job-user`, and then for
 *   all the jobs of that user together. A process that hits one sees its allocation or its
 *   fork fail, and the job ends as its program reports that (a Node job: Transient
 *   `out_of_memory` or `child_crashed`; a command: its exit code), not as `resource_limit`.
 */
export type LimitMechanism = 'cgroup' | 'rlimit';

export interface LimitPlan {
  cgroup?: CgroupLimits;
  rlimits?: ProcessLimits;
}

const PRLIMIT_PATH = '/usr/bin/prlimit';

export class LimitEnforcement {
  constructor(
    private readonly options: {
      /** Job processes run as a user of their own (RLIMIT_NPROC then means something). */
      jobUser: boolean;
      /** Use setrlimit even where a cgroup is there (how the fallback is tested on a machine that has cgroups). */
      rlimitOnly?: boolean;
    },
  ) {}

  /** What holds `limit` here, or undefined when nothing can. */
  mechanism(limit: keyof CgroupLimits): LimitMechanism | undefined {
    const controller = limit === 'memoryMb' ? 'memory' : 'pids';
    if (!this.options.rlimitOnly && ownCgroupDir(controller) !== undefined) return 'cgroup';
    if (!existsSync(PRLIMIT_PATH)) return undefined;
    return limit === 'memoryMb' || this.options.jobUser ? 'rlimit' : undefined;
  }

  /** Splits `limits` between a cgroup and rlimits; throws, naming what is missing, when one cannot be held here. */
  plan(limits: CgroupLimits): LimitPlan {
    const plan: LimitPlan = {};
    if (limits.memoryMb !== undefined) {
      const by = this.need('memoryMb');
      if (by === 'cgroup') plan.cgroup = { ...plan.cgroup, memoryMb: limits.memoryMb };
      else plan.rlimits = { ...plan.rlimits, dataBytes: limits.memoryMb * 1024 * 1024 };
    }
    if (limits.processes !== undefined) {
      const by = this.need('processes');
      if (by === 'cgroup') plan.cgroup = { ...plan.cgroup, processes: limits.processes };
      else plan.rlimits = { ...plan.rlimits, processes: limits.processes };
    }
    return plan;
  }

  /** One line for the operator: what holds each limit, and what cannot be held. */
  describe(): string {
    const parts = (['memoryMb', 'processes'] as const).map((limit) => {
      const by = this.mechanism(limit);
      const name = limit === 'memoryMb' ? 'memory' : 'processes';
      if (by === 'cgroup') return `${name}: cgroup v1 per job`;
      if (by === 'rlimit')
        return limit === 'memoryMb' ? `${name}: RLIMIT_DATA per process (prlimit)` : `${name}: RLIMIT_NPROC of the job user, all its jobs together (prlimit)`;
      return `${name}: NOT enforceable here (${this.missing(limit)}), types declaring it are refused`;
    });
    return `${parts.join('; ')}; scratch reserve watched every 200 ms`;
  }

  private need(limit: keyof CgroupLimits): LimitMechanism {
    const by = this.mechanism(limit);
    if (by === undefined) throw new Error(`limits.${limit} cannot be enforced on this machine: ${this.missing(limit)} (see docs/security.md)`);
    return by;
  }

  private missing(limit: keyof CgroupLimits): string {
    const cgroup = `no writable cgroup v1 "${limit === 'memoryMb' ? 'memory' : 'pids'}" hierarchy`;
    if (!existsSync(PRLIMIT_PATH)) return `${cgroup}, and no ${PRLIMIT_PATH} (util-linux)`;
    return `${cgroup}, and RLIMIT_NPROC needs --job-user (it counts every process of a user, and holds nothing for root)`;
  }
}
