/**
 * Checks the front matter against AFM_FRONT_MATTER_SCHEMA with ajv (all errors, not the first) and
 * turns each ajv error into a sentence that names the key the way it is written in the file
 * (`interfaces[0].exposure.http.path`) and says what was expected. Also compiles signature schemas.
 */
import { Ajv, type ErrorObject } from 'ajv';
import { AFM_FRONT_MATTER_SCHEMA } from './afmSchema.js';
import { pointerSegments, toPointer } from './yamlLocator.js';
import type { JsonSchema } from './types.js';

/** One structural problem: what and where (pointer to the value, or to the unknown key). */
export interface SchemaProblem {
  readonly pointer: string;
  /** Point at the key rather than the value (unknown keys). */
  readonly atKey: boolean;
  readonly message: string;
}

const ajv = new Ajv({ allErrors: true, discriminator: true, verbose: true, strict: true });
ajv.addKeyword({ keyword: 'hint', schemaType: 'string' });
const validateFrontMatter = ajv.compile(AFM_FRONT_MATTER_SCHEMA);

/** Signatures are compiled as draft-07 JSON Schema, like the interfaces and runtime do. */
const signatureAjv = new Ajv({ allErrors: true, strict: false });

/** `interfaces[0].exposure.http` from `/interfaces/0/exposure/http`; `front matter` for the root. */
export function displayPath(pointer: string): string {
  let out = '';
  for (const segment of pointerSegments(pointer)) {
    if (/^\d+$/.test(segment)) out += `[${segment}]`;
    else out += out ? `.${segment}` : segment;
  }
  return out || 'front matter';
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string')
    return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  return `${typeof value} ${String(value)}`;
}

const TYPE_NAMES: Record<string, string> = {
  object: 'a mapping',
  array: 'a list',
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'true or false',
};

function hintOf(err: ErrorObject): string | undefined {
  const schema = err.parentSchema as { hint?: unknown } | undefined;
  return typeof schema?.hint === 'string' ? schema.hint : undefined;
}

function messageFor(err: ErrorObject): SchemaProblem {
  const where = displayPath(err.instancePath);
  const p = err.params as Record<string, unknown>;
  const hint = hintOf(err);
  switch (err.keyword) {
    case 'additionalProperties': {
      const key = String(p.additionalProperty);
      const allowed = Object.keys(
        (err.parentSchema as { properties?: object } | undefined)?.properties ?? {},
      );
      const list = allowed.length ? `; allowed keys: ${allowed.join(', ')}` : '';
      return {
        pointer: toPointer([...pointerSegments(err.instancePath), key]),
        atKey: true,
        message: `unknown key '${key}' in ${where}${list}`,
      };
    }
    case 'required':
      return {
        pointer: err.instancePath,
        atKey: false,
        message: `${where} is missing the required key '${String(p.missingProperty)}'`,
      };
    case 'type': {
      const expected = String(p.type)
        .split(',')
        .map((t) => TYPE_NAMES[t] ?? t)
        .join(' or ');
      return {
        pointer: err.instancePath,
        atKey: false,
        message: `${where} must be ${expected}, not ${describeValue(err.data)}`,
      };
    }
    case 'discriminator': {
      const tag = String(p.tag);
      const allowed = where.startsWith('interfaces') ? 'consolechat, webchat or webhook' : 'http or stdio';
      const message =
        p.error === 'tag'
          ? `${where}.${tag} must be a string: one of ${allowed}`
          : `${where}.${tag} must be one of ${allowed}, not ${describeValue(p.tagValue)}`;
      return { pointer: toPointer([...pointerSegments(err.instancePath), tag]), atKey: false, message };
    }
    case 'enum':
      return {
        pointer: err.instancePath,
        atKey: false,
        message: `${where} must be one of ${((p.allowedValues as unknown[]) ?? []).join(', ')}, not ${describeValue(err.data)}`,
      };
    case 'propertyNames':
      return {
        pointer: toPointer([...pointerSegments(err.instancePath), String(p.propertyName)]),
        atKey: true,
        message: `key '${String(p.propertyName)}' in ${where} is not valid`,
      };
    default: {
      // Hints describe patterns and minimum sizes; other keywords keep ajv's precise wording.
      const hinted = err.keyword === 'pattern' || err.keyword === 'minItems';
      const detail = (hinted ? hint : undefined) ?? err.message ?? 'is invalid';
      return { pointer: err.instancePath, atKey: false, message: `${where} ${detail}` };
    }
  }
}

/** Every structural problem of the front matter (empty when it matches the schema). */
export function checkFrontMatterSchema(frontMatter: unknown): SchemaProblem[] {
  if (validateFrontMatter(frontMatter)) return [];
  const errors = validateFrontMatter.errors ?? [];
  // propertyNames reports the key once more as a pattern error on the name; keep the clearer one.
  const named = errors.filter(
    (e) =>
      e.keyword !== 'propertyNames' &&
      // A missing `type` is already reported by `required`.
      !(e.keyword === 'discriminator' && (e.params as { tagValue?: unknown }).tagValue === undefined),
  );
  const seen = new Set<string>();
  const out: SchemaProblem[] = [];
  for (const err of named.length ? named : errors) {
    const problem =
      err.keyword === 'pattern' && err.propertyName !== undefined
        ? {
            pointer: toPointer([...pointerSegments(err.instancePath), err.propertyName]),
            atKey: true,
            message: `key '${err.propertyName}' in ${displayPath(err.instancePath)} ${hintOf(err) ?? 'is not valid'}`,
          }
        : messageFor(err);
    const id = `${problem.pointer}|${problem.message}`;
    if (!seen.has(id)) out.push(problem);
    seen.add(id);
  }
  return out;
}

/** Why a signature schema is not usable: where inside it (JSON Pointer) and what. */
export interface SignatureSchemaProblem {
  readonly pointer: string;
  readonly message: string;
}

/**
 * Checks one side of a signature against the JSON Schema meta-schema, then compiles it (which also
 * catches unresolvable `$ref`s); returns the first reason it is not usable.
 */
export function signatureSchemaProblem(schema: JsonSchema): SignatureSchemaProblem | undefined {
  if (!signatureAjv.validateSchema(schema)) {
    // The meta-schema reports `type: strin` three ways (enum, array, anyOf); the first is the clearest.
    const first = (signatureAjv.errors ?? [])[0];
    if (first) {
      const where = first.instancePath ? displayPath(first.instancePath) : 'the schema';
      const allowed = (first.params as { allowedValues?: unknown[] }).allowedValues;
      const detail = allowed ? `: ${allowed.join(', ')}` : '';
      return { pointer: first.instancePath, message: `${where} ${first.message ?? 'is invalid'}${detail}` };
    }
  }
  try {
    signatureAjv.compile(schema);
    return undefined;
  } catch (err) {
    return { pointer: '', message: (err as Error).message };
  }
}
