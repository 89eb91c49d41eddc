/**
 * The HTTP body validators (http/bodyValidator.ts): the build's standalone module reports exactly
 * what the validators compiled at run time report, its list holds every body schema in src/, and an
 * ajv error becomes one problem naming the parameter as the route family names it.
 */
import { createRequire } from 'node:module';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { describe, expect, it } from 'vitest';
import { HTTP_BODY_SCHEMAS } from '../../src/edge/httpBodySchemas.js';
import {
  BODY_AJV_OPTIONS,
  BODY_SCHEMA_ANNOTATIONS,
  bodySchemaFingerprint,
  bodySchemaId,
  type BodySchema,
} from '../../src/http/bodySchema.js';
import { bodyValidator, formatParam, problemOf } from '../../src/http/bodyValidator.js';
import { bodyValidatorsSource } from '../../src/http/bodyValidatorBuild.js';

const require = createRequire(import.meta.url);
const SRC = resolve(import.meta.dirname, '../../src');

/** Evaluates the generated CommonJS source as the build's .cjs file would be loaded. */
function loadGenerated(): Record<string, unknown> {
  const module = { exports: {} as Record<string, unknown> };
  new Function('module', 'exports', 'require', bodyValidatorsSource(HTTP_BODY_SCHEMAS))(
    module,
    module.exports,
    require,
  );
  return module.exports;
}

function compiledAtRunTime(body: BodySchema): ValidateFunction {
  const ajv = new Ajv({ ...BODY_AJV_OPTIONS, code: { optimize: false } });
  ajv.addVocabulary([...BODY_SCHEMA_ANNOTATIONS]);
  return ajv.compile({ ...body.schema, $id: bodySchemaId(body.name) });
}

const USER = { role: 'user', content: 'hi' };
const AMP = {
  amp: '1.0',
  id: 'm1',
  from: { id: 'a' },
  to: 'b',
  intent: 'x',
  timestamp: '2026-01-01T00:00:00Z',
};
const SAMPLES: Record<string, unknown[]> = {
  openaiChatRequest: [
    null,
    { model: 'amf/echo', messages: [USER] },
    { model: 'amf/echo', messages: [USER, { role: 'wizard' }] },
    { model: 'amf/echo', messages: Array.from({ length: 1001 }, () => USER) },
    { model: 'amf/echo', messages: [{ role: 'user', content: [{ type: 'text', text: 3 }] }], stream: 1 },
  ],
  ampMessage: [
    AMP,
    { ...AMP, amp: '2' },
    { ...AMP, to: [] },
    { ...AMP, trust: { level: 'full', allowlist: [''] } },
    { ...AMP, ttl: 0 },
  ],
  fabricRequest: [{ name: 'fabric.call' }, { name: '' }, { name: 'x', arguments: [] }, 'x'],
  fabricCallArguments: [
    { agent_id: '*', capability: 'echo', task: 't' },
    { agent_id: ' ', capability: 'echo', task: 't' },
    { agent_id: '*', capability: 'Echo', task: 't', timeout_ms: 999 },
  ],
  agentApprove: [{}, { nkey: '' }, { nkey: 5 }, []],
  inviteRequest: [{ tags: ['echo'], ttl: '1h' }, { tags: ['Bad Tag'] }, { ttl: false }],
  joinRequest: [{ invite: 'x', nkey: 'U', name: 'n', proof: 'p' }, { invite: 'x' }],
  publishCancelPayload: [{ task_id: 'abc-1' }, { task_id: 'a b' }, 'x', { message: 3 }],
  workerTaskSend: [{ text: 'x', tag: 'echo' }, { id: 'mine', text: 'x' }, { task: 7 }],
};

describe('the precompiled body validators', () => {
  it('report what the validators compiled at run time report, for every schema', () => {
    const generated = loadGenerated();
    const fingerprints = generated.fingerprints as Record<string, string>;
    for (const body of HTTP_BODY_SCHEMAS) {
      expect(fingerprints[body.name]).toBe(bodySchemaFingerprint(body));
      const precompiled = generated[body.name] as ValidateFunction;
      const fresh = compiledAtRunTime(body);
      const samples = SAMPLES[body.name];
      expect(samples, `samples for ${body.name}`).toBeDefined();
      for (const sample of samples ?? []) {
        const verdict = precompiled(sample);
        expect(fresh(sample), `${body.name}: ${JSON.stringify(sample).slice(0, 80)}`).toBe(verdict);
        const describeErrors = (errors: ErrorObject[] | null | undefined) =>
          (errors ?? []).map((e) => [e.instancePath, e.keyword, problemOf(e)]);
        expect(describeErrors(precompiled.errors)).toEqual(describeErrors(fresh.errors));
      }
    }
  });

  it('are built for every body schema in src/', () => {
    const declared = new Set<string>();
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, e.name);
        if (e.isDirectory()) walk(path);
        else if (e.name.endsWith('.ts'))
          for (const m of readFileSync(path, 'utf8').matchAll(/: BodySchema = \{\s*name: '([^']+)'/g))
            declared.add(m[1]!);
      }
    };
    walk(SRC);
    expect(declared.size).toBeGreaterThan(3);
    expect(new Set(HTTP_BODY_SCHEMAS.map((b) => b.name))).toEqual(declared);
  });
});

describe('body problems', () => {
  const schema: BodySchema = {
    name: 'testBody',
    schema: {
      type: 'object',
      required: ['items'],
      properties: {
        items: {
          type: 'array',
          maxItems: 2,
          'x-error': { maxItems: '{param} holds more than 2 items' },
          items: { type: 'integer', 'x-expected': 'a whole number' },
        },
        mode: { enum: ['a', 'b'], 'x-error': '{param} must be "a" or "b", not {got}' },
      },
    },
  };

  it('name the parameter and say what was expected', () => {
    const check = bodyValidator<{ items: number[] }>(schema);
    expect(check({ items: [1] })).toEqual({ ok: true, value: { items: [1] } });
    expect(check({})).toEqual({ ok: false, problem: { param: 'items', message: 'items is required' } });
    expect(check({ items: [1, 'x'] })).toEqual({
      ok: false,
      problem: { param: 'items[1]', message: 'items[1] must be a whole number' },
    });
    expect(check({ items: [1, 2, 3] })).toMatchObject({
      problem: { message: 'items holds more than 2 items' },
    });
    expect(check({ items: [], mode: 'c' })).toMatchObject({
      problem: { param: 'mode', message: 'mode must be "a" or "b", not "c"' },
    });
    expect(check('x')).toMatchObject({ problem: { param: 'body', message: 'body must be object' } });
  });

  it('prefix the parameter and name the root as the family does', () => {
    const check = bodyValidator(schema, { prefix: 'arguments', root: 'arguments' });
    expect(check({ items: ['x'] })).toMatchObject({ problem: { param: 'arguments.items[0]' } });
    expect(formatParam([], { root: 'arguments' })).toBe('arguments');
    expect(formatParam(['messages', 2, 'role'])).toBe('messages[2].role');
  });

  it('stop at an oversized array before reading its items', () => {
    const check = bodyValidator(schema);
    const huge = Array.from({ length: 100_000 }, () => 'not a number');
    expect(check({ items: huge })).toMatchObject({ problem: { param: 'items' } });
  });
});
