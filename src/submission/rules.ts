/**
 * The rules every submission is held to, whichever way it arrives: over HTTP
 * (src/api/routes/submit.ts) or on the submit queue (src/orchestrator/submit-consumer.ts).
 * Both paths check with this module, so they refuse the same submissions with the same
 * words: a refusal the queue would take (a tenant `t2.checksum.finished`, a type of 250
 * characters, `maxAttempts: 1e15`, a 20 MB input) is one HTTP refuses too.
 *
 * Why each rule:
 * - names (tenant, type, capabilities) become words of AMQP routing keys and queue names
 *   (`<tenant>.<type>.<state>`, `<prefix>.work.<type>`): a `.`, `*` or `#` in them would
 *   let a tenant publish into another tenant's result stream, whitespace and non-ASCII
 *   make names nobody can type, and 64 characters keep every key far under AMQP's 255;
 * - input size and nesting: the input is stored, sent over IPC to a job process and
 *   walked by job code; one nested 4,000 levels deep once wedged a worker. Nesting is
 *   checked without recursion, so a body 100,000 levels deep is refused like any other.
 */
import type { ErrorObject } from 'ajv';
import { dispatchProperties } from './dispatch-fields.js';
import { jsonTextDepthExceeds, valueDepthExceeds } from './json-depth.js';

/** Letters, digits, `-` and `_`, starting with a letter, at most 64 characters. */
export const NAME_PATTERN = '^[A-Za-z][A-Za-z0-9_-]{0,63}$';
export const NAME_RULE = 'must start with a letter and hold only letters, digits, "-" and "_" (at most 64 characters)';
const nameRegExp = new RegExp(NAME_PATTERN);

export const submissionLimits = {
  /** A submission's body (an HTTP body by default, a queue message always), in bytes. */
  bodyBytes: 1024 * 1024,
  /**
   * Nesting a body may have before it is parsed at all: the input's limit with room for
   * the envelope (a batch holds inputs three levels down), and far below what a parser
   * or a checker could choke on.
   */
  bodyDepth: 128,
  /** The input as JSON text, in UTF-8 bytes. */
  inputBytes: 1024 * 1024,
  /** Levels of objects and lists in the input: `{}` is 1, `{"a":[1]}` is 2. */
  inputDepth: 64,
  maxAttempts: 100,
  /** A week: a longer run is a job that should report progress and be split, or a missing timeout. */
  timeoutSeconds: 7 * 24 * 3600,
  requires: 64,
  idempotencyKeyLength: 255,
  /** The least a job process needs to start; a job type's limits are held to the same. */
  limitMinimums: { memoryMb: 64, processes: 16 },
  /** 1 TiB and a million processes: a larger number is a mistake, not a limit. */
  limitMaximums: { memoryMb: 1024 * 1024, processes: 1_000_000 },
} as const;

/** Why `name` cannot be a tenant name, or undefined when it can. */
export function tenantNameProblem(name: string): string | undefined {
  if (nameRegExp.test(name)) return undefined;
  return `tenant name ${JSON.stringify(name)} ${NAME_RULE}`;
}

/** True when `name` can be a job type or a capability name. */
export function isValidName(name: string): boolean {
  return nameRegExp.test(name);
}

export const idempotencyKeySchema = {
  type: 'string',
  minLength: 1,
  maxLength: submissionLimits.idempotencyKeyLength,
  description: 'the same key (per tenant) always answers with the same job; sent once, as UTF-8 bytes (any other bytes, or a second header, are a 400)',
} as const;

/** The fields of a submission, as JSON Schema: what the HTTP API documents and both paths check. */
export const submissionProperties = {
  type: { type: 'string', pattern: NAME_PATTERN, description: 'the job type' },
  input: {
    description: `the job's input: any JSON of at most ${submissionLimits.inputBytes} bytes, nested at most ${submissionLimits.inputDepth} levels deep`,
  },
  requires: {
    type: 'array',
    maxItems: submissionLimits.requires,
    items: { type: 'string', pattern: NAME_PATTERN },
    description: 'capabilities a worker needs to run the job, beyond those its type requires',
  },
  maxAttempts: {
    type: 'integer',
    minimum: 1,
    maximum: submissionLimits.maxAttempts,
    description: "attempts before the job fails as exhausted (default: the orchestrator's)",
  },
  timeoutSeconds: {
    type: 'integer',
    minimum: 1,
    maximum: submissionLimits.timeoutSeconds,
    description:
      "how long one run may take: past it the job gets its abort signal, then SIGKILL, and the attempt fails Transient timeout (default: the job type's, else the worker's --job-timeout)",
  },
  limits: {
    type: 'object',
    additionalProperties: false,
    minProperties: 1,
    properties: {
      memoryMb: {
        type: 'integer',
        minimum: submissionLimits.limitMinimums.memoryMb,
        maximum: submissionLimits.limitMaximums.memoryMb,
        description: 'memory of all the run’s processes together, in MiB',
      },
      processes: {
        type: 'integer',
        minimum: submissionLimits.limitMinimums.processes,
        maximum: submissionLimits.limitMaximums.processes,
        description: 'processes and threads the run may have at once',
      },
    },
    description:
      "resource limits of one run; a run past one ends Permanent resource_limit. They can only lower the job type's own limits: the worker enforces the lower of each (default: the type's)",
  },
  ...dispatchProperties,
} as const;

/** Names the field at fault, e.g. `body/type must be string`, `body must NOT have property "tenant"`. */
export function describeSchemaErrors(errors: ErrorObject[], dataVar: string): string {
  return errors
    .map((error) => {
      const where = `${dataVar}${error.instancePath}`;
      if (error.keyword === 'additionalProperties') {
        return `${where} must NOT have property "${(error.params as { additionalProperty: string }).additionalProperty}"`;
      }
      return `${where} ${error.message ?? 'is invalid'}`;
    })
    .join('; ');
}

/** The refusal of a body over `limitBytes`, in the same words on both paths. */
export function bodyTooLarge(limitBytes: number): string {
  return `body is larger than the limit of ${limitBytes} bytes`;
}

/**
 * Why a JSON text must not even be parsed (nested deeper than `bodyDepth`), or undefined.
 * Runs before any parser, so none of them ever sees a body deep enough to hurt it.
 */
export function jsonTextProblem(text: string): string | undefined {
  if (!jsonTextDepthExceeds(text, submissionLimits.bodyDepth)) return undefined;
  return `body is nested deeper than the limit of ${submissionLimits.bodyDepth} levels (an input may nest at most ${submissionLimits.inputDepth})`;
}

/** Why `input` (found at `where`, e.g. `body/input`) breaks the input limits, or undefined. */
export function inputProblem(input: unknown, where: string): string | undefined {
  if (valueDepthExceeds(input, submissionLimits.inputDepth)) {
    return `${where} is nested deeper than the limit of ${submissionLimits.inputDepth} levels`;
  }
  // Not deeper than the limit, so stringifying cannot overflow the stack.
  const bytes = Buffer.byteLength(JSON.stringify(input ?? null), 'utf8');
  if (bytes > submissionLimits.inputBytes) return `${where} is larger than the limit of ${submissionLimits.inputBytes} bytes of JSON`;
  return undefined;
}
