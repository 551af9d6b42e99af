/**
 * How a wire type and its JSON schema are kept to one shape. Fastify serialises every
 * answer through its response schema, and a field the schema does not name is dropped
 * from the answer: so each object schema's `properties` is checked, by the compiler,
 * to name exactly the fields of the TypeScript type it serialises, no more and no fewer.
 *
 * ```ts
 * const properties = { id: { type: 'string' } } as const satisfies SchemaProperties<{ id: string }>;
 * ```
 *
 * (`satisfies` on each object literal, declared on its own: inside an `as const`
 * literal a nested `satisfies` would widen its values.)
 */
export type SchemaProperties<T> = { readonly [K in keyof T]-?: JsonSchema };

/** One JSON schema, as fastify and ajv take it. */
export type JsonSchema = Readonly<Record<string, unknown>>;

/** The fields of T that are not optional: what an object schema lists as `required`. */
export type RequiredKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T];

/** Every field of `properties`, for an object schema whose fields are all required. */
export function allRequired(properties: JsonSchema): string[] {
  return Object.keys(properties);
}

export const timeSchema = { type: 'string', format: 'date-time' } as const;
export const nullableTimeSchema = { type: ['string', 'null'], format: 'date-time' } as const;
