import { Ajv, type ErrorObject, type Options } from 'ajv';
import type { FastifyInstance, FastifySchemaCompiler } from 'fastify';

// allErrors stays off: collecting every error of a hostile body is a known DoS vector.
const common: Options = { allErrors: false, useDefaults: true };

// JSON bodies are typed already: coercing `"type": 5` into "5" would hide a client's bug,
// and an unknown property (a misspelt `maxAtempts`, a `tenant` that can never count) is
// refused rather than dropped in silence.
const bodyAjv = new Ajv({ ...common, coerceTypes: false, removeAdditional: false });

// Query strings and path parameters arrive as text, so `?limit=10` must become 10.
const textAjv = new Ajv({ ...common, coerceTypes: true, removeAdditional: false });

const compileValidator: FastifySchemaCompiler<object> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? bodyAjv : textAjv).compile(schema);

/** Names the field at fault, e.g. `body/type must be string`, `body must NOT have property "tenant"`. */
export function formatValidationError(errors: ErrorObject[], dataVar: string): Error {
  const message = errors
    .map((error) => {
      const where = `${dataVar}${error.instancePath}`;
      if (error.keyword === 'additionalProperties') {
        return `${where} must NOT have property "${(error.params as { additionalProperty: string }).additionalProperty}"`;
      }
      return `${where} ${error.message ?? 'is invalid'}`;
    })
    .join('; ');
  return new Error(message);
}

export function useStrictValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(compileValidator);
}
