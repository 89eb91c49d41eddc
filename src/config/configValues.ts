/**
 * Value handling of the configuration layers: coercion of env/flag strings to the types the schema
 * wants, `~` and relative path expansion, key case conversion, merging and freezing. Pure functions
 * over plain JSON values.
 */
import { isIP } from 'node:net';
import path from 'node:path';
import type { SchemaNode } from './configSchema.js';

/** A parsed configuration value, as YAML, env and flags produce it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** Turns strings from env/flags into the type the schema wants, when they spell one. */
export function coerce(value: Json, schema: SchemaNode | undefined): Json {
  if (!schema) return value;
  const types = schema.type === undefined ? [] : ([] as string[]).concat(schema.type);
  if (typeof value === 'string') {
    if ((types.includes('integer') || types.includes('number')) && /^-?\d+(\.\d+)?$/.test(value)) {
      return Number(value);
    }
    if (types.includes('boolean')) {
      const lower = value.toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(lower)) return true;
      if (['false', '0', 'no', 'off'].includes(lower)) return false;
    }
    if (types.includes('array') && schema.items?.type === 'string') {
      return value
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
    }
    return value; // left as is: validation then says what was expected
  }
  if (Array.isArray(value)) return value.map((v) => coerce(v, schema.items));
  if (isObject(value)) {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(value)) out[k] = coerce(v, schema.properties?.[k]);
    return out;
  }
  return value;
}

const PATH_KEYS: readonly (readonly string[])[] = [['data_dir'], ['policy', 'path'], ['worker', 'handler']];

// Relative paths in a file mean "next to the file"; in env or flags, "from the working directory".
export function resolvePaths(layer: JsonObject, home: string, base: string): JsonObject {
  const out = structuredClone(layer);
  for (const key of PATH_KEYS) {
    const parent = key.length === 1 ? out : out[key[0]!];
    const leaf = key[key.length - 1]!;
    if (!isObject(parent) || typeof parent[leaf] !== 'string') continue;
    const value = parent[leaf];
    if (key.join('.') === 'worker.handler' && value === 'echo') continue; // the built-in handler
    parent[leaf] = expandPath(value, home, base);
  }
  return out;
}

/** Expands `~` against `home` and resolves a relative path against `base`. */
export function expandPath(p: string, home: string, base: string): string {
  if (p === '~') return home;
  if (p.startsWith('~/')) return path.join(home, p.slice(2));
  return path.resolve(base, p);
}

// Clients cannot dial a wildcard address, so a coordinator bound to all interfaces is reached locally.
export function deriveUrl(host: string, port: number): string {
  let h = host;
  if (h === '0.0.0.0') h = '127.0.0.1';
  else if (h === '::' || h === '[::]') h = '[::1]';
  else if (isIP(h) === 6) h = `[${h}]`;
  return `http://${h}:${port}`;
}
/** True for a plain JSON object (not null, not an array). */
export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Merges `over` into a copy of `base`; objects merge key by key, everything else is replaced. */
export function deepMerge(base: JsonObject, over: JsonObject): JsonObject {
  const out: JsonObject = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    // Lists replace rather than concatenate: a layer states the whole list it wants.
    out[k] = isObject(v) && isObject(b) ? deepMerge(b, v) : structuredClone(v);
  }
  return out;
}

/** Sets `value` at the nested key path `at`, creating objects on the way. */
export function setIn(target: JsonObject, at: string[], value: Json): void {
  let node = target;
  for (const key of at.slice(0, -1)) {
    if (!isObject(node[key])) node[key] = {};
    node = node[key] as JsonObject;
  }
  node[at[at.length - 1]!] = value;
}

/** Drops `undefined` leaves, so an unset flag does not override a lower layer. */
export function stripUndefined(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stripUndefined);
  if (isObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = stripUndefined(v);
    return out;
  }
  return value;
}

/** `timeoutSeconds` -> `timeout_seconds`. */
export function camelToSnake(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function mapKeys(value: Json, rename: (k: string) => string): Json {
  if (Array.isArray(value)) return value.map((v) => mapKeys(v, rename));
  if (isObject(value)) {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(value)) out[rename(k)] = mapKeys(v, rename);
    return out;
  }
  return value;
}

/** Renames every key to snake_case (the `amf.yaml` and schema spelling). */
export function toSnake(value: Json): Json {
  return mapKeys(value, camelToSnake);
}

/** Renames every key to camelCase (the `AmfConfig` spelling). */
export function toCamel(value: Json): Json {
  return mapKeys(value, (k) => k.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase()));
}

/** Freezes `value` and everything reachable from it. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
