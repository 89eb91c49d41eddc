/**
 * Bounded under abuse, on a real coordinator and worker: `/events` clients that stop reading are cut
 * off once their backlog reaches `http.sse_max_buffered_bytes` (their sockets close, the drop is
 * counted), the number of streams is capped (`http.sse_max_clients`, 503 with Retry-After), a client
 * that keeps reading still gets its events, and requests whose headers or body stall are answered
 * 408 and closed on both the coordinator's and a worker's server, and a malformed %-escape in an A2A
 * REST path is a 400, not the SDK router's 500.
 */
import { connect, type Socket } from 'node:net';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const STALLED = 8;
const MAX_CLIENTS = STALLED + 2;
const MAX_BUFFERED = 128 * 1024;

/** A raw connection to `baseUrl` and everything it has received so far. */
interface RawClient {
  socket: Socket;
  received: () => string;
  closed: Promise<void>;
}

function rawConnect(baseUrl: string): Promise<RawClient> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect({ host: hostname, port: Number(port) }, () =>
      resolve({
        socket,
        received: () => Buffer.concat(chunks).toString('latin1'),
        closed,
      }),
    );
    const closed = new Promise<void>((done) => socket.once('close', () => done()));
    socket.on('data', (c: Buffer) => chunks.push(c));
    // A reset connection is what a dropped client sees; the test looks at 'close'.
    socket.on('error', () => undefined);
    socket.once('error', reject);
  });
}

/** Reads one metric's value from the coordinator's Prometheus text. */
async function metric(mesh: TestMesh, name: string): Promise<number> {
  const text = await (await mesh.fetch('/metrics')).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  if (!line) throw new Error(`metric ${name} not exported`);
  return Number(line.slice(name.length + 1));
}

/** An SSE client that keeps reading: collects `data:` lines and comments of its stream. */
async function readingClient(mesh: TestMesh, subject: string) {
  const controller = new AbortController();
  const res = await mesh.fetch(`/events?subject=${encodeURIComponent(subject)}`, {
    signal: controller.signal,
  });
  expect(res.status).toBe(200);
  const lines: string[] = [];
  const waiters: { match: (l: string) => boolean; resolve: (l: string) => void }[] = [];
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body!) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let i: number;
        while ((i = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, i);
          buffer = buffer.slice(i + 1);
          if (line === '') continue;
          lines.push(line);
          for (const w of [...waiters])
            if (w.match(line)) {
              waiters.splice(waiters.indexOf(w), 1);
              w.resolve(line);
            }
        }
      }
    } catch {
      // aborted at the end of the test
    }
  })();
  return {
    lines,
    next(match: (l: string) => boolean): Promise<string> {
      const seen = lines.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
    close: () => controller.abort(),
  };
}

describe('GET /events under clients that stop reading', () => {
  let mesh: TestMesh;
  let nc: NatsConnection;

  beforeAll(async () => {
    mesh = await startTestMesh({
      config: { http: { sseMaxClients: MAX_CLIENTS, sseMaxBufferedBytes: MAX_BUFFERED } },
    });
    nc = await mesh.connect('coordinator', 'test-burst');
  });
  afterAll(async () => {
    await mesh?.close();
  });

  it('cuts off stalled clients, caps the stream count, and keeps serving a reading client', async () => {
    const reader = await readingClient(mesh, 'amf.artifact.>');
    const stalled: RawClient[] = [];
    for (let i = 0; i < STALLED; i++) {
      const c = await rawConnect(mesh.url);
      c.socket.write(
        `GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${mesh.operatorKey}\r\n\r\n`,
      );
      stalled.push(c);
    }
    // Each stream is open once its first comment arrived; then the client stops reading.
    await mesh.waitFor(() => stalled.every((c) => c.received().includes(': connected')), 10_000, 'streams');
    for (const c of stalled) c.socket.pause();
    expect(await metric(mesh, 'amf_sse_clients')).toBe(STALLED + 1);
    expect(await metric(mesh, 'amf_sse_clients_max')).toBe(MAX_CLIENTS);

    // The cap: MAX_CLIENTS streams are open with one more, the next one is refused.
    const last = await mesh.fetch('/events');
    expect(last.status).toBe(200);
    const refused = await mesh.fetch('/events');
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const refusal = (await refused.json()) as { error: { code: string; message: string } };
    expect(refusal.error.code).toBe('OVERLOADED');
    expect(refusal.error.message).toContain('http.sse_max_clients');
    expect(await metric(mesh, 'amf_sse_clients_refused_total')).toBe(1);
    await last.body?.cancel();
    await mesh.waitFor(async () => (await metric(mesh, 'amf_sse_clients')) === STALLED + 1, 10_000, 'closed');

    // A burst on a subject only the stalled clients follow; the kernel's socket buffers take the
    // first megabytes, so the burst goes on until the coordinator has cut every stalled client off.
    const blob = new TextEncoder().encode(JSON.stringify({ pad: 'x'.repeat(60_000) }));
    for (let round = 0; round < 200; round++) {
      for (let i = 0; i < 20; i++) nc.publish('amf.evidence.publish', blob);
      await nc.flush();
      if ((await metric(mesh, 'amf_sse_clients_dropped_total')) >= STALLED) break;
    }
    expect(await metric(mesh, 'amf_sse_clients_dropped_total')).toBe(STALLED);
    expect(await metric(mesh, 'amf_sse_clients')).toBe(1);
    // The coordinator closed their connections: once they read again they see the end.
    for (const c of stalled) c.socket.resume();
    await Promise.all(stalled.map((c) => c.closed));
    expect(stalled.every((c) => c.socket.destroyed)).toBe(true);

    // The reading client was never cut off and still gets events; one larger than a client's whole
    // allowance arrives as a comment naming it instead.
    nc.publish('amf.artifact.publish', new TextEncoder().encode('x'.repeat(MAX_BUFFERED + 1)));
    nc.publish('amf.artifact.publish', new TextEncoder().encode('{"sentinel":true}'));
    const comment = await reader.next((l) => l.startsWith(': event on amf.artifact.publish'));
    expect(comment).toContain('http.sse_max_buffered_bytes');
    expect(await reader.next((l) => l.includes('"sentinel":true'))).toBe('data: {"sentinel":true}');
    expect(await metric(mesh, 'amf_sse_clients_dropped_total')).toBe(STALLED);

    // With slots free again, a new stream is accepted.
    const again = await mesh.fetch('/events');
    expect(again.status).toBe(200);
    await again.body?.cancel();
    reader.close();
  });
});

describe('slow requests', () => {
  let mesh: TestMesh;
  let worker: RunningWorker;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { http: { headersTimeoutSeconds: 0.5, bodyTimeoutSeconds: 1 } } });
    worker = await startWorker({
      name: 'slow-body-worker',
      tags: ['slowbody'],
      handler: echoHandler,
      natsUrl: mesh.coordinator.natsUrl,
      credential: mesh.coordinator.credentials.specialist,
      port: 0,
      heartbeatSeconds: 1,
      requestDeadlines: { headersTimeoutMs: 500, bodyTimeoutMs: 1000 },
      operatorKey: mesh.operatorKey,
    });
  });
  afterAll(async () => {
    await worker?.close(1000);
    await mesh?.close();
  });

  /** Sends `head` and a part of the declared body, then stalls; resolves with what came back. */
  async function stall(baseUrl: string, head: string): Promise<string> {
    const c = await rawConnect(baseUrl);
    c.socket.write(head);
    await c.closed;
    return c.received();
  }

  const bodyHead = (path: string, authorization = '') =>
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${authorization}content-type: application/json\r\ncontent-length: 4096\r\n\r\n{"text":"`;

  it.each(['/publish', '/v1/chat/completions', '/mcp/call', '/a2a'])(
    'answers a stalled body on the coordinator %s with 408 and closes',
    async (path) => {
      expect(await stall(mesh.url, bodyHead(path))).toMatch(/^HTTP\/1\.1 408 /);
    },
  );

  it('answers stalled headers on the coordinator with 408 and closes', async () => {
    expect(await stall(mesh.url, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nx-slow: ')).toMatch(
      /^HTTP\/1\.1 408 /,
    );
  });

  it.each(['/tasks/send', '/a2a'])(
    'answers a stalled body on the worker %s with 408 and closes',
    async (path) => {
      // With the operator key: `/tasks/send` refuses anyone else before it reads a byte of the body.
      const auth = `authorization: Bearer ${mesh.operatorKey}\r\n`;
      expect(await stall(worker.url, bodyHead(path, auth))).toMatch(/^HTTP\/1\.1 408 /);
    },
  );

  it('still serves a request that arrives in time', async () => {
    const res = await fetch(`${worker.url}/tasks/send`, {
      method: 'POST',
      headers: mesh.operatorHeaders({ 'content-type': 'application/json' }),
      body: JSON.stringify({ text: 'on time' }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { result: { text: string } }).result.text).toContain('on time');
  });
});

describe('malformed percent-encoding in A2A REST paths', () => {
  let mesh: TestMesh;
  let worker: RunningWorker;

  beforeAll(async () => {
    mesh = await startTestMesh();
    worker = await mesh.startWorker('pct-worker', ['pct'], echoHandler);
  });
  afterAll(async () => {
    await mesh?.close();
  });

  it.each([
    ['GET', '/a2a/rest/tasks/%ZZ'],
    ['GET', '/a2a/rest/v1/tasks/%ZZ'],
    ['POST', '/a2a/rest/tasks/%ZZ:cancel'],
  ])('answers %s %s with 400 google.rpc.Status on the coordinator and a worker', async (method, path) => {
    for (const base of [mesh.url, worker.url]) {
      const res = await fetch(`${base}${path}`, { method });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { code: number; status: string; message: string } };
      expect(body.error.code).toBe(400);
      expect(body.error.status).toBe('INVALID_ARGUMENT');
      expect(body.error.message).toContain('percent-encoding');
    }
  });

  it('still answers a well-formed unknown task id with 404', async () => {
    const res = await fetch(`${mesh.url}/a2a/rest/tasks/${encodeURIComponent('no such')}`);
    expect(res.status).toBe(404);
  });
});
