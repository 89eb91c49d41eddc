/**
 * The light path of a plain blocking A2A 1.0 JSON-RPC SendMessage (lightSendMessage.ts, issue 14):
 * two coordinator A2A servers over one real mesh (NATS, coordinator, echo worker), one with the
 * light path and one without, get the same requests. The light path must answer exactly as the
 * Express path does (body, status, content type; ids and times aside), persist the task the same
 * way, and leave everything that is not a plain blocking SendMessage of a new task to Express.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { createCoordinatorA2a, type CoordinatorA2a } from '../../src/protocols/a2a/index.js';
import { coordinatorPorts } from '../../src/apps/coordinatorApp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

let mesh: TestMesh;
const servers: http.Server[] = [];

/** One coordinator A2A server on an HTTP server of its own. */
async function serve(lightSendMessage: boolean): Promise<CoordinatorA2a & { url: string }> {
  let url = '';
  const a2a = createCoordinatorA2a(coordinatorPorts(mesh.coordinator).a2a, () => url, undefined, {
    lightSendMessage,
  });
  const server = http.createServer((req, res) => {
    void a2a.server.handle(req, res, new URL(req.url ?? '/', 'http://127.0.0.1'));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { ...a2a, url };
}

let light: CoordinatorA2a & { url: string };
let express: CoordinatorA2a & { url: string };

beforeAll(async () => {
  mesh = await startTestMesh();
  await mesh.startWorker('echo-light', ['echo'], echoHandler);
  light = await serve(true);
  express = await serve(false);
}, 60_000);

afterAll(async () => {
  for (const s of servers) s.close();
  await mesh?.close();
});

interface Answer {
  status: number;
  contentType: string | null;
  body: Record<string, unknown>;
}

async function post(base: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${base}/a2a`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0', ...headers },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    body: (await res.json()) as Record<string, unknown>,
  };
}

function sendMessage(
  text: string,
  extra: Record<string, unknown> = {},
  message: Record<string, unknown> = {},
) {
  return {
    jsonrpc: '2.0',
    id: 11,
    method: 'SendMessage',
    params: {
      message: {
        messageId: randomUUID(),
        role: 'ROLE_USER',
        parts: [{ text }],
        metadata: { tag: 'echo' },
        ...message,
      },
      ...extra,
    },
  };
}

/** The answer with what differs between two runs of the same request (ids, times) made constant. */
function normalised(answer: Answer): unknown {
  const ids = new Map<string, string>();
  const replace = (value: unknown, key = ''): unknown => {
    if (Array.isArray(value)) return value.map((v) => replace(v));
    if (typeof value === 'object' && value !== null)
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replace(v, k)]));
    if (typeof value !== 'string') return value;
    if (key === 'timestamp') return '<time>';
    if (
      /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value) ||
      /^[0-9a-f]{32}$/.test(value)
    ) {
      if (!ids.has(value)) ids.set(value, `<id${ids.size}>`);
      return ids.get(value);
    }
    return value;
  };
  return replace(answer);
}

describe('light SendMessage path', () => {
  it('answers a plain blocking SendMessage exactly as the Express path does, and stores the same task', async () => {
    const before = light.server.light!.served;
    const request = sendMessage('same answer on both paths');
    const a = await post(light.url, request);
    const b = await post(express.url, request);
    expect(light.server.light!.served).toBe(before + 1);
    expect(express.server.light).toBeUndefined();
    expect(a.status).toBe(200);
    expect(a.contentType).toBe(b.contentType);
    const task = (a.body.result as { task: { id: string; status: { state: string } } }).task;
    expect(task.status.state).toBe('TASK_STATE_COMPLETED');
    expect(JSON.stringify(a.body)).toContain('same answer on both paths');
    expect(normalised(a)).toEqual(normalised(b));
    // GetTask (Express on both) shows the task as the answer did, on either server.
    const otherTask = (b.body.result as { task: { id: string } }).task;
    const got = await post(light.url, { jsonrpc: '2.0', id: 12, method: 'GetTask', params: { id: task.id } });
    const gotOther = await post(express.url, {
      jsonrpc: '2.0',
      id: 12,
      method: 'GetTask',
      params: { id: otherTask.id },
    });
    expect((got.body.result as { id: string }).id).toBe(task.id);
    expect(normalised(got)).toEqual(normalised(gotOther));
    expect(light.server.light!.served).toBe(before + 1);
  });

  it('answers errors exactly as the Express path does (malformed params, no agent for the tag)', async () => {
    const before = light.server.light!.served;
    const noMessageId = sendMessage('x', {}, { messageId: '' });
    const unrouted = sendMessage('x', {}, { metadata: { tag: 'no-such-tag' } });
    for (const request of [noMessageId, unrouted]) {
      const a = await post(light.url, request);
      const b = await post(express.url, request);
      expect(a.body.error).toBeDefined();
      expect([a.status, a.contentType, normalised(a)]).toEqual([b.status, b.contentType, normalised(b)]);
    }
    expect(light.server.light!.served).toBe(before + 2);
  });

  it('leaves streaming, non-blocking, follow-ups, A2A 0.3 and extension headers to the Express path', async () => {
    const before = light.server.light!.served;
    const stream = await fetch(`${light.url}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0', accept: 'text/event-stream' },
      body: JSON.stringify({ ...sendMessage('streamed'), method: 'SendStreamingMessage' }),
    });
    expect(stream.headers.get('content-type')).toContain('text/event-stream');
    expect(await stream.text()).toContain('streamed');
    const nonBlocking = await post(
      light.url,
      sendMessage('later', { configuration: { returnImmediately: true } }),
    );
    expect((nonBlocking.body.result as { task: { id: string } }).task.id).toBeTruthy();
    const followUp = await post(light.url, sendMessage('again', {}, { taskId: randomUUID() }));
    expect((followUp.body.error as { code: number }).code).toBe(-32001);
    const legacy = await post(
      light.url,
      {
        jsonrpc: '2.0',
        id: 13,
        method: 'message/send',
        params: {
          message: {
            kind: 'message',
            messageId: randomUUID(),
            role: 'user',
            parts: [{ kind: 'text', text: 'old' }],
            metadata: { tag: 'echo' },
          },
        },
      },
      { 'a2a-version': '0.3' },
    );
    expect(JSON.stringify(legacy.body.result)).toContain('old');
    const withExtensions = await post(light.url, sendMessage('ext'), {
      'a2a-extensions': 'urn:example:none',
    });
    expect(JSON.stringify(withExtensions.body.result)).toContain('ext');
    expect(light.server.light!.served).toBe(before);
  });
});
