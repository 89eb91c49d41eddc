/**
 * Bad request bodies on a real mesh: each HTTP body validated by its JSON schema (http/bodyValidator.ts)
 * is refused with its route family's error shape, the status of an invalid request, and the offending
 * parameter named: type errors, missing fields and oversized arrays, for OpenAI
 * (`/v1/chat/completions`), AMP (`/api/amp/message`), Fabric (`/mcp/call`) and AMF's own routes
 * (approve, invites, join, a worker's `/tasks/send`, the payload of a cancel sent to `/publish`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { createEvent } from '../../src/events/cloudEvent.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

let mesh: TestMesh;
let worker: RunningWorker;

beforeAll(async () => {
  mesh = await startTestMesh();
  worker = await mesh.startWorker('echo-1', ['echo'], echoHandler);
}, 60_000);
afterAll(() => mesh?.close());

async function post(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${mesh.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

const USER = { role: 'user', content: 'hello' };

describe('OpenAI: the offending parameter in error.param', () => {
  it.each<[string, unknown, string, RegExp]>([
    ['a body that is no object', [USER], 'body', /must be a JSON object/],
    ['a model of the wrong type', { model: 42, messages: [USER] }, 'model', /model must be a model name/],
    ['a missing model', { messages: [USER] }, 'model', /you must provide a model parameter/],
    ['missing messages', { model: 'amf/echo' }, 'messages', /you must provide a messages parameter/],
    ['messages of the wrong type', { model: 'amf/echo', messages: 'hi' }, 'messages', /non-empty array/],
    [
      'more than 1000 messages',
      { model: 'amf/echo', messages: Array.from({ length: 1001 }, () => USER) },
      'messages',
      /more than 1000 entries/,
    ],
    [
      'a message without a role',
      { model: 'amf/echo', messages: [USER, USER, { content: 'x' }] },
      'messages[2].role',
      /messages\[2\]\.role is required: one of system, developer, user, assistant, tool/,
    ],
    [
      'a message of the wrong type',
      { model: 'amf/echo', messages: [USER, 'hello'] },
      'messages[1]',
      /messages\[1\] must be an object/,
    ],
    [
      'an image part',
      { model: 'amf/echo', messages: [{ role: 'user', content: [{ type: 'image_url', text: 'x' }] }] },
      'messages[0].content[0].type',
      /must be "text"/,
    ],
    [
      'a text part without text',
      { model: 'amf/echo', messages: [{ role: 'user', content: [{ type: 'text', text: 7 }] }] },
      'messages[0].content[0].text',
      /must be a string/,
    ],
    [
      'more than 1000 content parts',
      {
        model: 'amf/echo',
        messages: [
          { role: 'user', content: Array.from({ length: 1001 }, () => ({ type: 'text', text: 'x' })) },
        ],
      },
      'messages[0].content',
      /more than 1000 parts/,
    ],
    [
      'stream_options of the wrong type',
      { model: 'amf/echo', messages: [USER], stream_options: 'usage' },
      'stream_options',
      /stream_options must be an object/,
    ],
    [
      'include_usage of the wrong type',
      { model: 'amf/echo', messages: [USER], stream: true, stream_options: { include_usage: 'yes' } },
      'stream_options.include_usage',
      /must be a boolean/,
    ],
  ])('%s → 400', async (_what, body, param, message) => {
    const { status, json } = await post('/v1/chat/completions', body);
    expect(status).toBe(400);
    const error = json.error as { type: string; param: string; message: string; code: string };
    expect(error).toMatchObject({ type: 'invalid_request_error', param, code: 'invalid_request' });
    expect(error.message).toMatch(message);
  });

  it('keeps the checks only code can make after the schema: model naming and a live agent', async () => {
    const unnamed = await post('/v1/chat/completions', { model: 'gpt-4o', messages: [USER] });
    expect(unnamed.status).toBe(404);
    expect(unnamed.json.error).toMatchObject({ param: 'model', code: 'model_not_found' });
    const served = await post('/v1/chat/completions', {
      model: 'amf/echo',
      messages: [USER],
      temperature: 0.2,
    });
    expect(served.status).toBe(200);
  });
});

const HELLO = {
  amp: '1.0',
  id: 'msg_bad_bodies',
  from: { id: 'tester' },
  to: 'echo',
  intent: 'echo hello',
  timestamp: new Date().toISOString(),
};

describe('AMP: the field named in error.message', () => {
  it.each<[string, Record<string, unknown>, RegExp]>([
    ['an id of the wrong type', { ...HELLO, id: 5 }, /^id must be a non-empty string/],
    ['a missing intent', { ...HELLO, intent: undefined }, /^Missing required field: intent$/],
    ['a from without id', { ...HELLO, from: { name: 'x' } }, /^from\.id is required/],
    ['a from.id too long', { ...HELLO, from: { id: 'x'.repeat(257) } }, /^from\.id must be .* at most 256/],
    ['too many recipients', { ...HELLO, to: Array.from({ length: 17 }, () => 'echo') }, /1 to 16 ids/],
    [
      'an oversized allowlist',
      { ...HELLO, trust: { level: 'full', allowlist: Array.from({ length: 65 }, () => 'a') } },
      /^trust\.allowlist must be a list of at most 64/,
    ],
    ['a ttl of the wrong type', { ...HELLO, ttl: '60' }, /^ttl must be a whole number/],
    ['a trace_id of the wrong type', { ...HELLO, trace_id: 7 }, /^trace_id must be a non-empty string/],
  ])('%s → 400 invalid_message', async (_what, body, message) => {
    const { status, json } = await post('/api/amp/message', JSON.parse(JSON.stringify(body)));
    expect(status).toBe(400);
    expect(json).toMatchObject({ status: 'error', error: { code: 'invalid_message' } });
    expect((json.error as { message: string }).message).toMatch(message);
  });
});

describe('Fabric: the argument named in error', () => {
  const CALL = { agent_id: '*', capability: 'echo', task: 'x' };
  it.each<[string, unknown, RegExp]>([
    ['a body that is no object', [CALL], /a Fabric request must be a JSON object/],
    ['a name of the wrong type', { name: 7, arguments: CALL }, /^name is required/],
    [
      'stream of the wrong type',
      { name: 'fabric.call', arguments: CALL, stream: 'y' },
      /^stream must be a boolean/,
    ],
    [
      'arguments.stream of the wrong type',
      { name: 'fabric.call', arguments: { ...CALL, stream: 1 } },
      /^arguments\.stream must be a boolean/,
    ],
    [
      'a missing capability',
      { name: 'fabric.call', arguments: { agent_id: '*', task: 'x' } },
      /^arguments\.capability is required: a non-empty string/,
    ],
    [
      'a blank task',
      { name: 'fabric.call', arguments: { ...CALL, task: '   ' } },
      /^arguments\.task is required: a non-empty string/,
    ],
    [
      'a capability that is no tag',
      { name: 'fabric.call', arguments: { ...CALL, capability: 'Echo!' } },
      /^arguments\.capability must be a capability tag/,
    ],
    [
      'a context of the wrong type',
      { name: 'fabric.call', arguments: { ...CALL, context: ['a'] } },
      /^arguments\.context must be an object/,
    ],
    [
      'a timeout of the wrong type',
      { name: 'fabric.call', arguments: { ...CALL, timeout_ms: '5000' } },
      /^arguments\.timeout_ms must be a whole number from 1000 to 300000/,
    ],
  ])('%s → 400 BAD_INPUT', async (_what, body, message) => {
    const { status, json } = await post('/mcp/call', body);
    expect(status).toBe(400);
    expect(json).toMatchObject({ ok: false, result: null, error_code: 'BAD_INPUT' });
    expect(json.error).toMatch(message);
  });

  it('keeps a refused call in the caller’s trace', async () => {
    const traceId = '4bf92f35-77b3-4da6-a3ce-929d0e0e4736';
    const { status, json } = await post('/mcp/call', { arguments: {}, trace: { trace_id: traceId } });
    expect(status).toBe(400);
    expect(json).toMatchObject({ error_code: 'BAD_INPUT', trace: { trace_id: traceId } });
  });
});

describe('AMF routes: the offending parameter in error.param', () => {
  const KEY = `U${'A'.repeat(55)}`;
  const JOIN = { invite: 'token', nkey: KEY, name: 'joiner', proof: 'p'.repeat(86), tags: ['echo'] };
  it.each<[string, string, unknown, string, RegExp]>([
    [
      'approve: an nkey of the wrong type',
      '/agents/echo-1/approve',
      { nkey: 5 },
      'nkey',
      /^nkey must be the key/,
    ],
    [
      'approve: a body that is no object',
      '/agents/echo-1/approve',
      ['U'],
      'body',
      /must be \{"nkey": "U…"\}/,
    ],
    [
      'invites: tags of the wrong type',
      '/invites',
      { tags: 'echo' },
      'tags',
      /^tags must be a list of capability tags/,
    ],
    [
      'invites: more than 64 tags',
      '/invites',
      { tags: Array.from({ length: 65 }, () => 'a') },
      'tags',
      /at most 64/,
    ],
    [
      'invites: a tag that is no tag',
      '/invites',
      { tags: ['echo', 'Not A Tag'] },
      'tags[1]',
      /capability tags/,
    ],
    ['invites: a ttl of the wrong type', '/invites', { ttl: true }, 'ttl', /"ttl" must be a duration/],
    [
      'join: an invite of the wrong type',
      '/join',
      { ...JOIN, invite: 5 },
      'invite',
      /"invite" must be the token/,
    ],
    [
      'join: a missing proof',
      '/join',
      { ...JOIN, proof: undefined },
      'proof',
      /^proof is required: an Ed25519/,
    ],
    [
      'join: a malformed nkey',
      '/join',
      { ...JOIN, nkey: 'SU123' },
      'nkey',
      /"nkey" must be the agent's nkey/,
    ],
  ])('%s → 400', async (_what, path, body, param, message) => {
    const res = await mesh.fetch(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code: string; param: string; message: string } };
    expect(error).toMatchObject({ code: 'INVALID_REQUEST', param });
    expect(error.message).toMatch(message);
  });

  it.each<[string, unknown, string, RegExp]>([
    ['a text of the wrong type', { text: 5 }, 'text', /^text must be the task as a string/],
    ['no text', { tag: 'echo' }, 'text', /body needs "text"/],
    ['a tag of the wrong type', { text: 'x', tag: ['echo'] }, 'tag', /^tag must be one of the tags/],
    ['a tag this worker does not serve', { text: 'x', tag: 'relay' }, 'tag', /serves echo, not "relay"/],
  ])('a worker’s /tasks/send: %s → 400', async (_what, body, param, message) => {
    const res = await fetch(`${worker.url}/tasks/send`, {
      method: 'POST',
      headers: mesh.operatorHeaders({ 'content-type': 'application/json' }),
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code: string; param: string; message: string } };
    expect(error).toMatchObject({ code: 'INVALID_REQUEST', param });
    expect(error.message).toMatch(message);
  });
});

describe('POST /publish: the payload of a cancel', () => {
  const sender = {
    identity: 'amf:test',
    source: 'urn:amf:test',
    role: 'connector',
    trustDomain: 'local',
  } as const;
  it.each<[string, Record<string, unknown>, RegExp, string]>([
    [
      'a task_id of the wrong type',
      { task_id: 5 },
      /^a cancel names its task: data\.payload\.task_id/,
      '/data/payload/task_id',
    ],
    ['a malformed task_id', { task_id: 'a b' }, /^a cancel names its task/, '/data/payload/task_id'],
    [
      'a message of the wrong type',
      { task_id: 'abc', message: 7 },
      /^data\.payload\.message must be a string/,
      '/data/payload/message',
    ],
  ])('%s → 400 naming it in message and reasons', async (_what, payload, message, pointer) => {
    const event = createEvent({ type: 'amf.task.cancel', sender, payload: payload as never });
    const res = await mesh.fetch('/publish', {
      method: 'POST',
      headers: { 'content-type': 'application/cloudevents+json' },
      body: JSON.stringify(event),
    });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code: string; message: string; reasons: string[] } };
    expect(error.code).toBe('INVALID_REQUEST');
    expect(error.message).toMatch(message);
    expect(error.reasons.some((r) => r.startsWith(`${pointer}: `))).toBe(true);
  });
});
