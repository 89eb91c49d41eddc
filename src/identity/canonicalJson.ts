/**
 * The canonical JSON text that event signatures cover: object keys sorted by UTF-16 code units at
 * every level, no whitespace, `undefined` members dropped (RFC 8785 for the values AMF events carry:
 * strings, integers, booleans, null, arrays, objects). Built in one pass with string appends; keys
 * are sorted in place, and no intermediate arrays are allocated.
 */

/** The canonical JSON text of `value` (sorted keys, no whitespace). */
export function canonicalJson(value: unknown): string {
  return write(value);
}

/**
 * The canonical JSON text of `object` without the members named in `omit`, and with the member
 * `inner.key` (an object) written without the members in `inner.omit`: the signed parts of an event
 * without copying it first.
 */
export function canonicalJsonOmitting(
  object: Record<string, unknown>,
  omit: ReadonlySet<string>,
  inner?: { key: string; omit: ReadonlySet<string> },
): string {
  return writeObject(object, omit, inner);
}

function write(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      return Array.isArray(value) ? writeArray(value) : writeObject(value as Record<string, unknown>);
    default:
      // Numbers (non-finite ones become null, as in JSON); functions and symbols have no JSON form.
      return JSON.stringify(value) ?? 'null';
  }
}

function writeArray(items: readonly unknown[]): string {
  let out = '[';
  for (let i = 0; i < items.length; i++) {
    if (i > 0) out += ',';
    out += write(items[i] ?? null);
  }
  return `${out}]`;
}

function writeObject(
  object: Record<string, unknown>,
  omit?: ReadonlySet<string>,
  inner?: { key: string; omit: ReadonlySet<string> },
): string {
  const keys = Object.keys(object);
  sortKeys(keys);
  let out = '{';
  let first = true;
  for (const key of keys) {
    const member = object[key];
    if (member === undefined || omit?.has(key)) continue;
    if (!first) out += ',';
    first = false;
    out += memberName(key);
    out +=
      inner?.key === key && typeof member === 'object' && member !== null && !Array.isArray(member)
        ? writeObject(member as Record<string, unknown>, inner.omit)
        : write(member);
  }
  return `${out}}`;
}

/**
 * Sorts keys by UTF-16 code units (what `<` compares, and what the canonical form asks for). An
 * event's objects have a handful of keys: insertion sort in place allocates nothing, where
 * `Array.prototype.sort` copies the array first (a third of the canonical form's garbage in the
 * mesh benchmark's allocation profile). Keys are unique, so stability does not matter.
 */
function sortKeys(keys: string[]): void {
  if (keys.length > 32) {
    keys.sort();
    return;
  }
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i] as string;
    let j = i - 1;
    while (j >= 0 && (keys[j] as string) > key) {
      keys[j + 1] = keys[j] as string;
      j--;
    }
    keys[j + 1] = key;
  }
}

/**
 * `"key":` for a member. Events repeat the same few dozen keys, so their quoted forms are kept
 * (short keys only, and at most MEMBER_NAMES_KEPT of them, whatever a sender puts in its events).
 */
const memberNames = new Map<string, string>();
const MEMBER_NAMES_KEPT = 512;

function memberName(key: string): string {
  let name = memberNames.get(key);
  if (name === undefined) {
    name = `${JSON.stringify(key)}:`;
    if (key.length <= 64 && memberNames.size < MEMBER_NAMES_KEPT) memberNames.set(key, name);
  }
  return name;
}
