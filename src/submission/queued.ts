/**
 * A message on the submit queue read into a submission, held to the rules HTTP holds its
 * bodies to (./rules.ts), checked in the order HTTP checks them: size, nesting, JSON,
 * shape, then the tenant and the input.
 */
import { Ajv } from 'ajv';
import type { JobLimits } from '../wire/jobs.js';
import type { DispatchFields } from './dispatch-fields.js';
import { bodyTooLarge, describeSchemaErrors, inputProblem, jsonTextProblem, submissionLimits, submissionProperties, tenantNameProblem } from './rules.js';

/** A body on the submit queue: the HTTP body plus the tenant. */
const queuedSubmissionSchema = {
  type: 'object',
  required: ['tenant', 'type', 'input'],
  additionalProperties: false,
  properties: { tenant: { type: 'string' }, ...submissionProperties },
} as const;

export interface QueuedSubmission extends DispatchFields {
  tenant: string;
  type: string;
  input: unknown;
  requires?: string[];
  maxAttempts?: number;
  timeoutSeconds?: number;
  limits?: JobLimits;
}

// Like the HTTP API's body validation (src/api/validation.ts): no coercion, unknown
// properties refused, the first error only (collecting all of a hostile body's is a DoS).
const validateQueued = new Ajv({ allErrors: false, useDefaults: true, coerceTypes: false, removeAdditional: false }).compile<QueuedSubmission>(
  queuedSubmissionSchema,
);

/**
 * Reads a submit-queue message body into a submission, or says why it cannot be one, in
 * the words HTTP would use for the same body.
 */
export function readQueuedSubmission(body: Buffer): QueuedSubmission | string {
  if (body.length > submissionLimits.bodyBytes) return bodyTooLarge(submissionLimits.bodyBytes);
  const text = body.toString('utf8');
  const tooDeep = jsonTextProblem(text);
  if (tooDeep) return tooDeep;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return `body is not JSON: ${(error as Error).message}`;
  }
  if (!validateQueued(parsed)) return describeSchemaErrors(validateQueued.errors ?? [], 'body');
  return tenantNameProblem(parsed.tenant) ?? inputProblem(parsed.input, 'body/input') ?? parsed;
}
