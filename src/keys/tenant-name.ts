/**
 * Tenant names follow the rule for job type names (see src/worker/runner/job-type.ts):
 * a tenant is the first word of every result routing key (`<tenant>.<type>.<state>`), so
 * `.`, `*`, `#` and spaces must stay out of it.
 */
const TENANT_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

/** Why `name` cannot be a tenant name, or undefined when it can. */
export function tenantNameProblem(name: string): string | undefined {
  if (TENANT_NAME_PATTERN.test(name)) return undefined;
  return `tenant name "${name}" must start with a letter and hold only letters, digits, "-" and "_" (at most 64 characters)`;
}
