import type { FleetMember } from './fleet.js';

/** Job types and capabilities the fleet is known to have even when no worker is heard from. */
export interface DeclaredFleet {
  jobTypes: string[];
  capabilities: string[];
}

/**
 * Whether anyone can run a job, and if not, what is missing.
 *
 * The fleet is the workers heard from within the fleet window plus what configuration
 * declares. A job is routable when one member offers its type with every capability it
 * requires (a declared type counts with the declared capabilities). When the fleet is
 * empty and nothing is declared, nothing is judged: the job waits for workers, so a fleet
 * briefly empty during a deploy does not fail every job that arrives meanwhile.
 *
 * A worker offers only the types whose own `requires` its capabilities meet, and reports
 * the others as held back with what it lacks: a type nobody offers but somebody holds back
 * is named with those missing capabilities, as a job's own `requires` are.
 *
 * Returns undefined when the job can be routed (or cannot be judged), else a message
 * naming what is missing.
 */
export function missingCapability(
  job: { type: string; requires: readonly string[] },
  members: readonly FleetMember[],
  declared: DeclaredFleet,
): string | undefined {
  const offers = [...members.map((m) => ({ jobTypes: m.jobTypes, capabilities: m.capabilities })), ...(declared.jobTypes.length > 0 ? [declared] : [])];
  if (offers.length === 0) return undefined;
  const ofType = offers.filter((offer) => offer.jobTypes.includes(job.type));
  if (ofType.length === 0) {
    const lacking = members.flatMap((m) => (m.heldBack ?? []).filter((held) => held.type === job.type).map((held) => held.missing));
    if (lacking.length === 0) return `no worker of the fleet offers job type "${job.type}"`;
    // What every worker that has the type lacks; when they lack different ones, all of them.
    const lackedByAll = lacking[0]!.filter((capability) => lacking.every((missing) => missing.includes(capability)));
    const named = lackedByAll.length > 0 ? lackedByAll : [...new Set(lacking.flat())];
    return `no worker of the fleet offers job type "${job.type}": the workers that have it lack capabilities it requires: missing ${quoted(named)}`;
  }
  if (ofType.some((offer) => job.requires.every((capability) => offer.capabilities.includes(capability)))) return undefined;
  const missing = job.requires.filter((capability) => !ofType.some((offer) => offer.capabilities.includes(capability)));
  const named = missing.length > 0 ? missing : job.requires;
  return `no worker of the fleet offering job type "${job.type}" has the capabilities it requires: missing ${quoted(named)}`;
}

function quoted(capabilities: readonly string[]): string {
  return capabilities.map((c) => `"${c}"`).join(', ');
}

/**
 * The job types the fleet offers, by the same rule: undefined when the fleet is empty and
 * nothing is declared, since then nothing is judged.
 */
export function offeredJobTypes(members: readonly FleetMember[], declared: DeclaredFleet): ReadonlySet<string> | undefined {
  if (members.length === 0 && declared.jobTypes.length === 0) return undefined;
  return new Set([...members.flatMap((m) => m.jobTypes), ...declared.jobTypes]);
}
