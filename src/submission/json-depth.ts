/**
 * Nesting depth of JSON, measured without recursion: a checker that recursed would itself
 * overflow the stack on the bodies it is there to refuse. Depth counts objects and lists:
 * a scalar is 0, `{}` and `[]` are 1, `{"a":[1]}` is 2.
 */

const OPEN_OBJECT = 0x7b; // {
const OPEN_LIST = 0x5b; // [
const CLOSE_OBJECT = 0x7d; // }
const CLOSE_LIST = 0x5d; // ]
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \

/**
 * True when the JSON text opens more than `limit` objects and lists inside each other.
 * Brackets inside strings do not count. Text that is not JSON is measured all the same
 * (the parser refuses it afterwards); one pass, constant memory.
 */
export function jsonTextDepthExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === BACKSLASH) i++;
      else if (code === QUOTE) inString = false;
    } else if (code === QUOTE) {
      inString = true;
    } else if (code === OPEN_OBJECT || code === OPEN_LIST) {
      if (++depth > limit) return true;
    } else if (code === CLOSE_OBJECT || code === CLOSE_LIST) {
      depth--;
    }
  }
  return false;
}

/**
 * True when a parsed value nests objects and lists more than `limit` deep. It stops at
 * the first path past the limit, so its cost is bounded by the value's size, never by
 * how deep it goes.
 */
export function valueDepthExceeds(value: unknown, limit: number): boolean {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (typeof next.value !== 'object' || next.value === null) continue;
    const depth = next.depth + 1;
    if (depth > limit) return true;
    for (const item of Object.values(next.value)) pending.push({ value: item, depth });
  }
  return false;
}
