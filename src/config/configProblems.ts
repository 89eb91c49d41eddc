/**
 * Validation of one configuration layer and the messages it produces: JSON-schema problems from ajv,
 * rules that span several values, "did you mean" key suggestions, and where a value sits in the
 * YAML file. Every message names the key the user has to edit and says what was expected.
 */
import { isIP } from 'node:net';
import type { ErrorObject } from 'ajv';
import type { SchemaNode } from './configSchema.js';
import { configValidator } from './configValidator.js';
import { camelToSnake, isObject, type Json } from './configValues.js';

/** One segment of a path into the configuration: a key or a list index. */
type Seg = string | number;

/** One problem found in a layer, before it is labelled with the place the user has to edit. */
export interface Problem {
  path: Seg[];
  /** The problem is the key itself (unknown key), so locate the key rather than its value. */
  isKey: boolean;
  message: string;
}

/** Validates a layer and labels each problem with its source (file, env variable or flag). */
export function checkLayer(data: Json, label: (p: Problem) => string): string[] {
  return findProblems(data).map(label);
}

/** Every schema and semantic problem of `data`, at most one per key. */
export function findProblems(data: Json): Problem[] {
  const validate = configValidator();
  const problems: Problem[] = [];
  if (!validate(data)) problems.push(...fromAjv(validate.errors ?? []));
  // Semantic checks tolerate invalid data, so they run too: one pass shows everything.
  const seen = new Set(problems.map(problemId));
  problems.push(...semanticProblems(data).filter((p) => !seen.has(problemId(p))));
  return problems;
}

function problemId(p: Problem): string {
  return `${p.isKey}:${p.path.join('\u0000')}`;
}

function fromAjv(errors: ErrorObject[]): Problem[] {
  const out: Problem[] = [];
  const seen = new Set<string>();
  const add = (p: Problem): void => {
    const id = problemId(p);
    if (seen.has(id)) return; // one message per key: e.g. minimum and type never both
    seen.add(id);
    out.push(p);
  };
  for (const e of errors) {
    const at = parsePointer(e.instancePath);
    const schema = (e.parentSchema ?? {}) as SchemaNode;
    switch (e.keyword) {
      case 'if':
      case 'allOf':
        break; // the branch's own error says what is wrong
      case 'additionalProperties': {
        const key = (e.params as { additionalProperty: string }).additionalProperty;
        const known = Object.keys(schema.properties ?? {});
        const guess = suggest(key, known);
        const hint = guess ? `did you mean ${guess}?` : `expected one of: ${known.join(', ')}`;
        add({ path: [...at, key], isKey: true, message: `unknown key (${hint})` });
        break;
      }
      case 'required': {
        const key = (e.params as { missingProperty: string }).missingProperty;
        const when = schema['x-when'] ? ` when ${schema['x-when']}` : '';
        add({ path: [...at, key], isKey: true, message: `is required${when}` });
        break;
      }
      default: {
        const expected = schema['x-expected'];
        let message = expected ? `must be ${expected}` : (e.message ?? 'is invalid');
        if (e.keyword === 'uniqueItems') {
          const { i } = e.params as { i: number };
          message += ` (${describe((e.data as Json[])[i])} appears twice)`;
        } else if (!schema['x-secret']) {
          message += ` (got ${describe(e.data as Json)}${yaml11Hint(schema, e.data)})`;
        }
        add({ path: at, isKey: false, message });
      }
    }
  }
  return out;
}

// Rules that depend on several values at once, which the schema expresses poorly.
function semanticProblems(data: Json): Problem[] {
  const out: Problem[] = [];
  if (!isObject(data)) return out;
  const mdns = data.mdns;
  if (isObject(mdns) && typeof mdns.interface === 'string' && isIP(mdns.interface) === 0) {
    out.push({
      path: ['mdns', 'interface'],
      isKey: false,
      message: `must be an IP address of the interface to advertise on (got ${describe(mdns.interface)})`,
    });
  }
  const servers = isObject(data.mcp) ? data.mcp.servers : undefined;
  if (Array.isArray(servers)) {
    servers.forEach((s, i) => {
      if (!isObject(s)) return;
      const other = s.transport === 'http' ? ['command', 'args', 'env'] : ['url'];
      const needs = s.transport === 'http' ? 'stdio' : 'http';
      for (const key of other) {
        if (s[key] !== undefined) {
          out.push({
            path: ['mcp', 'servers', i, key],
            isKey: true,
            message: `only applies when transport is "${needs}" (this server's transport is "${String(s.transport)}")`,
          });
        }
      }
    });
    out.push(...duplicateNames(servers, ['mcp', 'servers']));
  }
  const agents = isObject(data.a2a) ? data.a2a.agents : undefined;
  if (Array.isArray(agents)) out.push(...duplicateNames(agents, ['a2a', 'agents']));
  return out;
}

function duplicateNames(list: Json[], at: Seg[]): Problem[] {
  const first = new Map<string, number>();
  const out: Problem[] = [];
  list.forEach((item, i) => {
    if (!isObject(item) || typeof item.name !== 'string') return;
    const prev = first.get(item.name);
    if (prev === undefined) first.set(item.name, i);
    else {
      out.push({
        path: [...at, i, 'name'],
        isKey: false,
        message: `duplicate name "${item.name}" (already used by ${formatPath([...at, prev])})`,
      });
    }
  });
  return out;
}

// YAML 1.2 (unlike 1.1) reads yes/no/on/off as strings, a classic surprise worth naming.
function yaml11Hint(schema: SchemaNode, value: unknown): string {
  const wantsBoolean = ([] as unknown[]).concat(schema.type).includes('boolean');
  const looksBoolean = typeof value === 'string' && /^(y|n|yes|no|on|off)$/i.test(value);
  return wantsBoolean && looksBoolean ? '; YAML 1.2 reads yes/no/on/off as strings' : '';
}

function describe(value: Json | undefined): string {
  if (value === undefined) return 'nothing';
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** Closest known key within a small edit distance, or the snake_case form of a camelCase key. */
function suggest(key: string, known: string[]): string | undefined {
  const snake = camelToSnake(key);
  if (snake !== key && known.includes(snake)) return snake;
  // A key missing its unit or qualifier (timeout -> timeout_seconds) is far in edits but obvious.
  const extended = known.filter((k) => k.startsWith(`${snake}_`)).sort((a, b) => a.length - b.length)[0];
  if (extended) return extended;
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const d = editDistance(key.toLowerCase(), candidate);
    const limit = Math.max(2, Math.ceil(Math.max(key.length, candidate.length) / 3));
    if (d <= limit && d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + cost);
    }
    prev = row;
  }
  return prev[b.length]!;
}

function parsePointer(pointer: string): Seg[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

/** `coordinator.port`, `mcp.servers[0].url`. */
export function formatPath(at: Seg[]): string {
  return at.map((s, i) => (typeof s === 'number' ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
}
