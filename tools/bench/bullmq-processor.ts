/**
 * The no-op processor of BullMQ's sandboxed section (2s): BullMQ runs it in a child
 * process of its own pool, as planrun runs a job. It returns when it started (the clock
 * every process of the machine shares), so the driver can time submit-to-start.
 */
export default function noop(): { startedAt: number } {
  return { startedAt: performance.timeOrigin + performance.now() };
}
