/**
 * The A2A protocol edge as the spec and the TCK see it, over real HTTP on a real mesh: POST /a2a/
 * (trailing slash) is JSON-RPC; /a2a/rest/* is the HTTP+JSON binding (application/json, AIP-193
 * errors, 415 for an unsupported Content-Type); unsupported part media types and negative
 * historyLength are refused; the agent card carries caching headers and answers 304.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

let mesh: TestMesh;
let workerUrl: string;

beforeAll(async () => {
  mesh = await startTestMesh();
  workerUrl = (await mesh.startWorker('echo-bind', ['echo'], echoHandler)).url;
}, 60_000);

afterAll(async () => {
  await mesh?.close();
});

const V1 = { 'a2a-version': '1.0' };

function rpc(method: string, params: unknown) {
  return JSON.stringify({ jsonrpc: '2.0', id: 7, method, params });
}

function message(parts: unknown[]) {
  return { message: { messageId: crypto.randomUUID(), role: 'ROLE_USER', parts, metadata: { tag: 'echo' } } };
}

describe.each([
  ['coordinator', () => mesh.url],
  ['worker', () => workerUrl],
])('%s', (_name, base) => {
  it('POST /a2a/ (trailing slash) is the JSON-RPC endpoint', async () => {
    const res = await fetch(`${base()}/a2a/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...V1 },
      body: rpc('SendMessage', message([{ text: 'slash' }])),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      jsonrpc: string;
      id: number;
      result: { task: { status: { state: string } } };
    };
    expect(body).toMatchObject({ jsonrpc: '2.0', id: 7 });
    expect(body.result.task.status.state).toBe('TASK_STATE_COMPLETED');
  });

  it('JSON-RPC: a non-JSON Content-Type is ContentTypeNotSupportedError (-32005), before parsing', async () => {
    const res = await fetch(`${base()}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', ...V1 },
      body: "{'not': 'json'}",
    });
    const body = (await res.json()) as { jsonrpc: string; error: { code: number } };
    expect(body.jsonrpc).toBe('2.0');
    expect(body.error.code).toBe(-32005);
  });

  it('JSON-RPC: errors are JSON-RPC bodies with an ErrorInfo in data', async () => {
    const res = await fetch(`${base()}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...V1 },
      body: rpc('GetTask', { id: crypto.randomUUID() }),
    });
    const body = (await res.json()) as { error: { code: number; data: Array<Record<string, unknown>> } };
    expect(body.error.code).toBe(-32001);
    expect(body.error.data).toContainEqual(
      expect.objectContaining({ reason: 'TASK_NOT_FOUND', domain: 'a2a-protocol.org' }),
    );
  });

  it('a part of an unsupported media type is ContentTypeNotSupportedError', async () => {
    const res = await fetch(`${base()}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...V1 },
      body: rpc('SendMessage', message([{ raw: 'dGNr', mediaType: 'application/x-unknown' }])),
    });
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32005);
  });

  it('a negative historyLength is an invalid-params error', async () => {
    const res = await fetch(`${base()}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...V1 },
      body: rpc('SendMessage', { ...message([{ text: 'x' }]), configuration: { historyLength: -1 } }),
    });
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32602);
  });

  it('HTTP+JSON: answers application/json; a text/plain body is 415 with an AIP-193 error', async () => {
    const ok = await fetch(`${base()}/a2a/rest/message:send`, {
      method: 'POST',
      headers: { 'content-type': 'application/a2a+json', ...V1 },
      body: JSON.stringify(message([{ text: 'rest' }])),
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toMatch(/^application\/json/);
    const refused = await fetch(`${base()}/a2a/rest/message:send`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', ...V1 },
      body: 'hello',
    });
    expect(refused.status).toBe(415);
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await refused.json()) as {
      error: { code: number; details: Array<Record<string, unknown>> };
    };
    expect(body.error.code).toBe(415);
    expect(body.error.details).toContainEqual(
      expect.objectContaining({ reason: 'CONTENT_TYPE_NOT_SUPPORTED', domain: 'a2a-protocol.org' }),
    );
  });

  it('HTTP+JSON: an unsupported part media type is 415, an unknown task 404, never a JSON-RPC body', async () => {
    const part = await fetch(`${base()}/a2a/rest/message:send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...V1 },
      body: JSON.stringify(message([{ raw: 'dGNr', mediaType: 'application/x-unknown' }])),
    });
    expect(part.status).toBe(415);
    const missing = await fetch(`${base()}/a2a/rest/tasks/${crypto.randomUUID()}`, { headers: V1 });
    expect(missing.status).toBe(404);
    const body = (await missing.json()) as Record<string, unknown>;
    expect(body).not.toHaveProperty('jsonrpc');
    expect(body).toHaveProperty('error.status', 'NOT_FOUND');
  });

  it('the agent card has Cache-Control, ETag and Last-Modified, and answers 304 to its ETag', async () => {
    const res = await fetch(`${base()}/.well-known/agent-card.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toMatch(/max-age=\d+/);
    const etag = res.headers.get('etag');
    expect(etag).toMatch(/^"[^"]+"$/);
    expect(Number.isNaN(Date.parse(res.headers.get('last-modified') ?? ''))).toBe(false);
    const again = await fetch(`${base()}/.well-known/agent-card.json`, {
      headers: { 'if-none-match': etag! },
    });
    expect(again.status).toBe(304);
    expect(again.headers.get('etag')).toBe(etag);
    const other = await fetch(`${base()}/.well-known/agent-card.json`, {
      headers: { 'if-none-match': '"x"' },
    });
    expect(other.status).toBe(200);
  });
});
