/**
 * Validation of HTTP request bodies against their JSON schemas (bodySchema.ts). The validators are
 * the ones the build precompiled (dist/http/bodyValidators.generated.cjs, written by
 * scripts/build-validators.mjs) when they were built from the current schema, else compiled here
 * once per process; ajv itself is only loaded for that fallback. A failure is one problem: the
 * parameter to fix, named as the route family names parameters (`messages[2].role`), and a message
 * saying what was expected, which each family wraps in its own error shape.
 */
import { createRequire } from 'node:module';
import { AmfError } from '../errors.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import {
  BODY_AJV_OPTIONS,
  BODY_SCHEMA_ANNOTATIONS,
  bodySchemaFingerprint,
  bodySchemaId,
  type BodySchema,
  type BodySchemaNode,
} from './bodySchema.js';

const require = createRequire(import.meta.url);

/** What is wrong with a body: the parameter to fix and what was expected of it. */
export interface BodyProblem {
  /** The parameter as the family names it: `messages[2].role`, `arguments.task`, or the root name. */
  param: string;
  message: string;
}

export type BodyCheck<T> = { ok: true; value: T } | { ok: false; problem: BodyProblem };

/** How problems are named: the parameter prefix (`arguments`) and the name of the body itself. */
export interface ParamNaming {
  /** Prepended to every parameter (`arguments` → `arguments.task`). */
  prefix?: string;
  /** The parameter named when the body itself is wrong (default `body`). */
  root?: string;
}

type Precompiled = Record<string, ValidateFunction | undefined> & { fingerprints?: Record<string, string> };

let generated: Precompiled | null | undefined;
let fallback: import('ajv').Ajv | undefined;
const compiled = new Map<string, ValidateFunction>();

function precompiled(body: BodySchema): ValidateFunction | undefined {
  if (generated === undefined) {
    try {
      generated = require('./bodyValidators.generated.cjs') as Precompiled;
    } catch {
      generated = null; // not built (tests run the sources): compile instead
    }
  }
  // One built from an older schema (tsc run without the build step) is not used.
  if (!generated || generated.fingerprints?.[body.name] !== bodySchemaFingerprint(body)) return undefined;
  return generated[body.name];
}

function compileNow(body: BodySchema): ValidateFunction {
  if (!fallback) {
    const { Ajv } = require('ajv') as typeof import('ajv');
    // The fallback compiles once per schema and process: compiling fast matters more than running fast.
    fallback = new Ajv({ ...BODY_AJV_OPTIONS, code: { optimize: false } });
    fallback.addVocabulary([...BODY_SCHEMA_ANNOTATIONS]);
  }
  return fallback.compile({ ...body.schema, $id: bodySchemaId(body.name) });
}

function validatorOf(body: BodySchema): ValidateFunction {
  let validate = compiled.get(body.name);
  if (!validate) {
    validate = precompiled(body) ?? compileNow(body);
    compiled.set(body.name, validate);
  }
  return validate;
}

/**
 * A checker for bodies of schema `body`. `T` is the shape the schema guarantees: the one place a
 * validated value is taken as typed, so route code reads fields without casts.
 */
export function bodyValidator<T>(
  body: BodySchema,
  naming: ParamNaming = {},
): (value: unknown) => BodyCheck<T> {
  return (value) => {
    const validate = validatorOf(body);
    if (validate(value)) return { ok: true, value: value as T };
    const first = validate.errors?.[0];
    return {
      ok: false,
      problem: first ? problemOf(first, naming) : { param: naming.root ?? 'body', message: 'is invalid' },
    };
  };
}

/**
 * The value of `check(value)`, or an INVALID_REQUEST naming the parameter (`details.param`): the
 * error of AMF's own routes, answered as `{error: {code, message, param}}`.
 */
export function validBody<T>(check: (value: unknown) => BodyCheck<T>, value: unknown): T {
  const checked = check(value);
  if (!checked.ok)
    throw new AmfError('INVALID_REQUEST', checked.problem.message, { param: checked.problem.param });
  return checked.value;
}

/** The problem an ajv error describes, in the words of the schema's annotations. */
export function problemOf(e: ErrorObject, naming: ParamNaming = {}): BodyProblem {
  const path = parsePointer(e.instancePath);
  const node = (e.parentSchema ?? {}) as BodySchemaNode;
  let template: string;
  if (e.keyword === 'required') {
    const key = (e.params as { missingProperty: string }).missingProperty;
    path.push(key);
    const expected = node.properties?.[key]?.['x-expected'];
    template = node['x-missing'] ?? (expected ? `{param} is required: ${expected}` : '{param} is required');
  } else if (e.keyword === 'additionalProperties') {
    path.push((e.params as { additionalProperty: string }).additionalProperty);
    template = `{param} is not a known parameter (expected one of: ${Object.keys(node.properties ?? {}).join(', ')})`;
  } else {
    const custom = node['x-error'];
    const given = typeof custom === 'string' ? custom : custom?.[e.keyword];
    const expected = node['x-expected'];
    template = given ?? (expected ? `{param} must be ${expected}` : `{param} ${e.message ?? 'is invalid'}`);
  }
  const param = formatParam(path, naming);
  return {
    param,
    message: template.replace(/\{param\}/g, param).replace(/\{got\}/g, () => describe(e.data)),
  };
}

/** `messages[2].role`, `arguments.task`; the root name for the body itself. */
export function formatParam(path: ReadonlyArray<string | number>, naming: ParamNaming = {}): string {
  const parts = naming.prefix ? [naming.prefix, ...path] : path;
  if (parts.length === 0) return naming.root ?? 'body';
  return parts.map((s, i) => (typeof s === 'number' ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
}

function parsePointer(pointer: string): Array<string | number> {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

/** A short rendering of an offending value (never long: bodies can be large). */
function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}
