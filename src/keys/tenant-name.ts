/**
 * Tenant names follow the rule for job type names: a tenant is the first word of every
 * result routing key (`<tenant>.<type>.<state>`), so `.`, `*`, `#` and spaces must stay
 * out of it. The rule lives with the other submission rules (src/submission/rules.ts),
 * which hold queue submissions to it too.
 */
export { tenantNameProblem } from '../submission/rules.js';
