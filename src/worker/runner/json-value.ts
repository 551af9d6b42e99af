/**
 * Job input and results travel as JSON (over IPC, the broker and the ledger), so anything
 * that JSON would silently change (a Date into a string, a Map into `{}`, NaN into null)
 * is refused up front, where the job author can still see which value was wrong.
 */

/** Names a value for an error message: `the number 5`, `a Map`, `undefined`. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  switch (typeof value) {
    case 'undefined':
      return 'undefined';
    case 'string':
      return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)}`;
    case 'number':
    case 'boolean':
    case 'bigint':
      return `the ${typeof value} ${String(value)}${typeof value === 'bigint' ? 'n' : ''}`;
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
  }
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype === Object.prototype || prototype === null) return 'an object';
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' ? `a ${name}` : 'an object of some class';
}

/**
 * Returns why `value` would not come back unchanged from a JSON round trip, naming where
 * (`data.items[2] is a Map`), or undefined when it is plain JSON. Object properties that
 * are `undefined` count as absent, as in JSON.
 */
export function findJsonProblem(value: unknown, at: string): string | undefined {
  return findProblem(value, at, new Set());
}

function findProblem(value: unknown, at: string, ancestors: Set<object>): string | undefined {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return undefined;
  if (typeof value === 'number') {
    return Number.isFinite(value) ? undefined : `${at} is ${describeValue(value)}, which JSON cannot hold`;
  }
  if (typeof value !== 'object') return `${at} is ${describeValue(value)}, which JSON cannot hold`;
  if (ancestors.has(value)) return `${at} refers back to one of its own parents (a cycle)`;

  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      for (let index = 0; index < value.length; index++) {
        const item: unknown = value[index];
        if (item === undefined) return `${at}[${index}] is undefined (or a hole), which JSON turns into null`;
        const problem = findProblem(item, `${at}[${index}]`, ancestors);
        if (problem) return problem;
      }
      return undefined;
    }
    const prototype: unknown = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) {
      return `${at} is ${describeValue(value)}, not a plain object; convert it to plain JSON first`;
    }
    for (const [key, item] of Object.entries(value)) {
      if (item === undefined) continue;
      const problem = findProblem(item, `${at}.${key}`, ancestors);
      if (problem) return problem;
    }
    return undefined;
  } finally {
    ancestors.delete(value);
  }
}
