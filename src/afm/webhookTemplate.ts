/**
 * Webhook prompt templates (AFM 7.3): `${http:payload…}` and `${http:header.NAME}` filled per request.
 * A template is compiled once at load time (so syntax errors surface in `amf validate` with a line and
 * column) and evaluated per webhook call. Anything that is not an `http:` variable stays literal, and
 * `$${` writes a literal `${`.
 *
 * Path grammar after `http:payload`: `.name` | `['quoted.key']` | `["quoted key"]` | `[index]`, in any
 * combination, including a bracket right after `payload` (`${http:payload['a.b']}`, `${http:payload[0]}`).
 */
import { WebhookTemplateError } from './afmErrors.js';
import type { WebhookHeaders, WebhookTemplate } from './types.js';

/** One step of a payload path. */
export type PayloadPathStep =
  { readonly kind: 'key'; readonly key: string } | { readonly kind: 'index'; readonly index: number };

/** A parsed template piece. */
export type TemplatePart =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'payload'; readonly source: string; readonly path: readonly PayloadPathStep[] }
  | { readonly kind: 'header'; readonly source: string; readonly name: string };

/** A reference found while scanning, with its offset in the template (for line/column reports). */
export interface TemplateSyntaxProblem {
  readonly offset: number;
  readonly message: string;
  readonly variable: string;
}

// RFC 9110 token characters: what a header field name may contain.
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;
const MAX_INDEX = 1_000_000_000;

/**
 * Splits a template into parts; returns every syntax problem instead of throwing (the validator
 * reports them all). Unterminated `${` is literal text, as in the reference implementations.
 */
export function scanWebhookTemplate(text: string): {
  parts: TemplatePart[];
  problems: TemplateSyntaxProblem[];
} {
  const parts: TemplatePart[] = [];
  const problems: TemplateSyntaxProblem[] = [];
  let literal = '';
  let i = 0;
  while (i < text.length) {
    if (text.startsWith('$${', i)) {
      literal += '${';
      i += 3;
      continue;
    }
    if (!text.startsWith('${', i)) {
      literal += text[i];
      i += 1;
      continue;
    }
    const close = text.indexOf('}', i + 2);
    if (close < 0) {
      literal += text.slice(i);
      break;
    }
    const source = text.slice(i, close + 1);
    const expr = text.slice(i + 2, close).trim();
    if (!expr.startsWith('http:')) {
      literal += source;
    } else {
      const parsed = parseHttpReference(expr, source);
      if (typeof parsed === 'string') {
        problems.push({ offset: i, message: parsed, variable: source });
        literal += source;
      } else {
        if (literal) parts.push({ kind: 'text', text: literal });
        literal = '';
        parts.push(parsed);
      }
    }
    i = close + 1;
  }
  if (literal) parts.push({ kind: 'text', text: literal });
  return { parts, problems };
}

/** Parses `http:…` (without `${ }`); returns an error message when it is malformed. */
function parseHttpReference(expr: string, source: string): TemplatePart | string {
  const rest = expr.slice('http:'.length);
  const prefix = /^[A-Za-z_]*/.exec(rest)?.[0] ?? '';
  if (prefix === 'payload') {
    const path = parsePayloadPath(rest.slice('payload'.length));
    if (typeof path === 'string') return `invalid http variable ${source}: ${path}`;
    return { kind: 'payload', source, path };
  }
  if (prefix === 'header') {
    const after = rest.slice('header'.length);
    const name = after.startsWith('.') ? after.slice(1) : '';
    if (!name || !HEADER_NAME.test(name)) {
      return `invalid http variable ${source}: expected \${http:header.NAME} with a header name such as User-Agent`;
    }
    return { kind: 'header', source, name };
  }
  return `unknown http variable prefix '${prefix || rest}' in ${source}: expected http:payload or http:header`;
}

/** Parses the path after `payload`; returns a message when malformed. */
export function parsePayloadPath(path: string): PayloadPathStep[] | string {
  const steps: PayloadPathStep[] = [];
  let i = 0;
  while (i < path.length) {
    const c = path[i];
    if (c === '.') {
      let j = i + 1;
      while (j < path.length && path[j] !== '.' && path[j] !== '[' && path[j] !== ']') j += 1;
      const key = path.slice(i + 1, j);
      if (!key) return `empty field name at position ${i + 1} (use ['…'] for unusual keys)`;
      steps.push({ kind: 'key', key });
      i = j;
    } else if (c === '[') {
      const q = path[i + 1];
      if (q === "'" || q === '"') {
        let j = i + 2;
        let key = '';
        while (j < path.length && path[j] !== q) {
          if (path[j] === '\\' && j + 1 < path.length) j += 1;
          key += path[j];
          j += 1;
        }
        if (j >= path.length || path[j + 1] !== ']')
          return `unterminated quoted key starting at position ${i + 1}`;
        steps.push({ kind: 'key', key });
        i = j + 2;
      } else {
        const close = path.indexOf(']', i);
        const digits = close < 0 ? '' : path.slice(i + 1, close);
        if (!/^\d+$/.test(digits) || Number(digits) > MAX_INDEX) {
          return `invalid array index [${close < 0 ? path.slice(i + 1) : digits}]: expected a non-negative integer or a quoted key`;
        }
        steps.push({ kind: 'index', index: Number(digits) });
        i = close + 1;
      }
    } else {
      return `unexpected '${c}' at position ${i + 1}: expected '.', '[index]' or ['key']`;
    }
  }
  return steps;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function render(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? 'null');
}

/** Walks `path` through `payload`; throws a WebhookTemplateError naming the missing step. */
export function resolvePayloadPath(
  payload: unknown,
  path: readonly PayloadPathStep[],
  source: string,
): unknown {
  let current = payload;
  for (const step of path) {
    if (step.kind === 'index') {
      if (!Array.isArray(current)) {
        throw new WebhookTemplateError(
          'not_an_array',
          `Cannot access index ${step.index} on non-array (${describe(current)}) in ${source}`,
          source,
        );
      }
      if (step.index >= current.length) {
        throw new WebhookTemplateError(
          'index_out_of_bounds',
          `Array index out of bounds: ${step.index} (array has ${current.length} element${current.length === 1 ? '' : 's'}) in ${source}`,
          source,
        );
      }
      current = current[step.index] as unknown;
    } else {
      if (current === null || typeof current !== 'object' || Array.isArray(current)) {
        throw new WebhookTemplateError(
          'not_an_object',
          `Cannot access field '${step.key}' on non-object (${describe(current)}) in ${source}`,
          source,
        );
      }
      // Own properties only: `__proto__` or `constructor` must not reach the prototype.
      if (!Object.hasOwn(current, step.key)) {
        throw new WebhookTemplateError(
          'field_not_found',
          `Field '${step.key}' not found in the webhook payload (${source})`,
          source,
        );
      }
      current = (current as Record<string, unknown>)[step.key];
    }
  }
  return current;
}

/** Header lookup, case-insensitive; repeated headers joined with ", ". */
export function lookupHeader(headers: WebhookHeaders, name: string): string | undefined {
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== wanted || value === undefined) continue;
    return typeof value === 'string' ? value : value.join(', ');
  }
  return undefined;
}

/**
 * Compiles a webhook prompt template. Throws WebhookTemplateError (reason `syntax`) listing every
 * malformed variable; the returned function throws WebhookTemplateError for a missing field, index or
 * header. `${http:payload}` is the whole payload as compact JSON; strings are inserted as they are,
 * other values as JSON.
 */
export function compileWebhookTemplate(text: string): WebhookTemplate {
  const { parts, problems } = scanWebhookTemplate(text);
  const first = problems[0];
  if (first) {
    throw new WebhookTemplateError('syntax', problems.map((p) => p.message).join('; '), first.variable);
  }
  return (payload, headers) => {
    let out = '';
    for (const part of parts) {
      if (part.kind === 'text') out += part.text;
      else if (part.kind === 'payload') out += render(resolvePayloadPath(payload, part.path, part.source));
      else {
        const value = lookupHeader(headers, part.name);
        if (value === undefined) {
          throw new WebhookTemplateError(
            'header_not_found',
            `Header '${part.name}' not found in the webhook request (${part.source})`,
            part.source,
          );
        }
        out += value;
      }
    }
    return out;
  };
}
