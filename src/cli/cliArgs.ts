/** Argument parsers shared by the `amf` commands (commander calls them with the raw flag value). */
import { AmfError } from '../errors.js';

/** `a, b,,c` → `['a', 'b', 'c']`. */
export function splitTags(value: string): string[] {
  return value
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t.length > 0);
}

/** A TCP port, 0 meaning "any free port". */
export function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new AmfError('INVALID_REQUEST', `invalid port "${value}": expected an integer 0..65535`);
  return n;
}
