import { Ajv, type ErrorObject, type Options } from 'ajv';
import type { FastifyInstance, FastifySchemaCompiler } from 'fastify';
import { describeSchemaErrors, jsonTextProblem } from '../submission/rules.js';

// allErrors stays off: collecting every error of a hostile body is a known DoS vector.
const common: Options = { allErrors: false, useDefaults: true };

// JSON bodies are typed already: coercing `"type": 5` into "5" would hide a client's bug,
// and an unknown property (a misspelt `maxAtempts`, a `tenant` that can never count) is
// refused rather than dropped in silence.
const bodyAjv = new Ajv({ ...common, coerceTypes: false, removeAdditional: false });

// Query strings and path parameters arrive as text, so `?limit=10` must become 10.
const textAjv = new Ajv({ ...common, coerceTypes: true, removeAdditional: false });

const compileValidator: FastifySchemaCompiler<object> = ({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : textAjv).compile(schema);

/** Fastify's schema error formatter, in the words the submit queue uses too (src/submission/rules.ts). */
export function formatValidationError(errors: ErrorObject[], dataVar: string): Error {
  return new Error(describeSchemaErrors(errors, dataVar));
}

export function useStrictValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(compileValidator);
}

/**
 * JSON bodies are measured for nesting before fastify's parser (and its prototype
 * poisoning check, which recurses) sees them: one nested 10,000 levels deep is a 400
 * naming the limit, as on the submit queue, instead of a stack overflow.
 */
export function refuseDeepBodies(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const problem = jsonTextProblem(body as string);
    if (problem) {
      done(Object.assign(new Error(problem), { statusCode: 400 }), undefined);
      return;
    }
    void parse(request, body as string, done);
  });
}
