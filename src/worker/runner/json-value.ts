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
 *
 * It walks the value with a stack of its own rather than by recursion: an input nested
 * thousands of levels deep must get an answer, not overflow this process's stack.
 */
export function findJsonProblem(value: unknown, at: string): string | undefined {
  // Depth first, children in order, so the first problem found is the one a recursive
  // walk would find. An `exit` entry marks where a container's children end, so that
  // `ancestors` holds exactly the containers above the value being looked at.
  const pending: Array<Visit | { exit: object }> = [{ value, place: { at } }];
  const ancestors = new Set<object>();
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if ('exit' in next) {
      ancestors.delete(next.exit);
      continue;
    }
    const problem = problemOf(next, ancestors);
    if (problem !== undefined) return `${pathOf(next.place)} ${problem}`;
    if (typeof next.value !== 'object' || next.value === null) continue;
    ancestors.add(next.value);
    pending.push({ exit: next.value });
    const children = Array.isArray(next.value)
      ? // Array.from, unlike map, visits holes (as undefined), which must be reported.
        Array.from(next.value as unknown[], (item, index) => ({ value: item, place: { parent: next.place, index }, isListItem: true }))
      : Object.entries(next.value as Record<string, unknown>)
          .filter(([, item]) => item !== undefined)
          .map(([key, item]) => ({ value: item, place: { parent: next.place, key } }));
    for (let index = children.length - 1; index >= 0; index--) pending.push(children[index]!);
  }
  return undefined;
}

/** Where a value sits: the root's name, or its parent and its key or index there. */
type Place = { at: string } | { parent: Place; key: string } | { parent: Place; index: number };

interface Visit {
  value: unknown;
  place: Place;
  isListItem?: boolean;
}

/** Why this one value (not its children) is not plain JSON, as the end of a sentence naming it. */
function problemOf({ value, isListItem }: Visit, ancestors: Set<object>): string | undefined {
  if (value === undefined && isListItem) return 'is undefined (or a hole), which JSON turns into null';
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `is ${describeValue(value)}, which JSON cannot hold`;
  if (typeof value !== 'object') return `is ${describeValue(value)}, which JSON cannot hold`;
  if (ancestors.has(value)) return 'refers back to one of its own parents (a cycle)';
  if (Array.isArray(value)) return undefined;
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) {
    return `is ${describeValue(value)}, not a plain object; convert it to plain JSON first`;
  }
  return undefined;
}

/** `input.items[2].name`, built only when a problem is reported. */
function pathOf(place: Place): string {
  const parts: string[] = [];
  let current = place;
  while (!('at' in current)) {
    parts.push('key' in current ? `.${current.key}` : `[${current.index}]`);
    current = current.parent;
  }
  return current.at + parts.reverse().join('');
}
