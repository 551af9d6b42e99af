import { PermanentError, type SerializedError } from '../../core/errors.js';
import type { JobRunResult } from './job-type.js';
import { describeValue, findJsonProblem } from './json-value.js';

/** How one run ended. Job failures are outcomes, never rejections. */
export type RunOutcome = { ok: true; result: JobRunResult } | { ok: false; error: SerializedError };

export function failed(error: SerializedError): RunOutcome {
  return { ok: false, error };
}

const RESULT_PROPERTIES = ['data', 'outputs'];

/**
 * Turns what `run()` returned into an outcome, refusing (permanent `invalid_result`) any
 * shape the worker could not store faithfully: the same value would fail the same way on
 * every attempt, so retrying would only waste them.
 */
export function outcomeOfReturnedValue(returned: unknown, source = 'run() returned'): RunOutcome {
  if (returned === undefined) return { ok: true, result: {} };
  if (typeof returned !== 'object' || returned === null || Array.isArray(returned)) {
    return invalidResult(`${source} ${describeValue(returned)}; it must be { data?, outputs? }`);
  }
  const fields = returned as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((key) => !RESULT_PROPERTIES.includes(key));
  if (unknown.length > 0) {
    const names = unknown.map((key) => `"${key}"`).join(', ');
    return invalidResult(`${source} unknown properties ${names}; a result has data and outputs`);
  }
  const { data, outputs } = fields;
  if (outputs !== undefined && !(Array.isArray(outputs) && outputs.every((name) => typeof name === 'string'))) {
    return invalidResult(`outputs is ${describeValue(outputs)}; it must be a list of file names inside the scratch folder`);
  }
  const dataProblem = data === undefined ? undefined : findJsonProblem(data, 'data');
  if (dataProblem !== undefined) return invalidResult(`the job's result is not plain JSON: ${dataProblem}`);

  const result: JobRunResult = {};
  if (data !== undefined) result.data = data;
  if (outputs !== undefined) result.outputs = outputs;
  return { ok: true, result };
}

function invalidResult(message: string): RunOutcome {
  return failed(new PermanentError('invalid_result', message).toJSON());
}
