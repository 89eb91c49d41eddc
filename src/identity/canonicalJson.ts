/**
 * The canonical JSON text that event signatures cover: object keys sorted by UTF-16 code units at
 * every level, no whitespace, `undefined` members dropped (RFC 8785 for the values AMF events carry:
 * strings, integers, booleans, null, arrays, objects). Built in one pass with string appends; keys
 * are sorted only when they are not in order already (events built by AMF's own code mostly are
 * not, a JSON round trip keeps the sender's order), and no intermediate arrays are allocated.
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
  // Default sort compares UTF-16 code units, which is what the canonical form asks for.
  if (!inOrder(keys)) keys.sort();
  let out = '{';
  let first = true;
  for (const key of keys) {
    const member = object[key];
    if (member === undefined || omit?.has(key)) continue;
    if (!first) out += ',';
    first = false;
    const text =
      inner?.key === key && typeof member === 'object' && member !== null && !Array.isArray(member)
        ? writeObject(member as Record<string, unknown>, inner.omit)
        : write(member);
    out += `${JSON.stringify(key)}:${text}`;
  }
  return `${out}}`;
}

function inOrder(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) if ((keys[i - 1] as string) > (keys[i] as string)) return false;
  return true;
}
