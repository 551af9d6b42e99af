/**
 * Exit code of a worker process stopped by a Fatal error (sysexits' EX_SOFTWARE): its
 * supervisor should start a fresh one. `planrun worker` exits with it; supervisors and the
 * chaos checker tell a Fatal stop from a crash by it.
 */
export const fatalExitCode = 70;
