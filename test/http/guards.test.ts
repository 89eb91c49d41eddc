/**
 * The coordinator's HTTP guards on a real coordinator: the operator key (routeAccess.ts: operator
 * routes always, client routes beyond loopback, a credential that is not the key refused wherever it
 * is given), GCRA rate limiting per client address (429 + Retry-After), request size limits (413,
 * declared and chunked), each refusal in the error shape of its route family.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const KEY = 'guard-test-key-0123456789';

interface Reply {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

async function send(
  mesh: TestMesh,
  method: string,
  path: string,
  body?: string,
  key?: string,
  /** A whole Authorization header instead of `Bearer <key>`. */
  authorization = key ? `Bearer ${key}` : undefined,
): Promise<Reply> {
  const res = await fetch(`${mesh.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
    ...(body !== undefined ? { body } : {}),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}

/** Expects `reply` to carry the error shape of the route family of `path`. */
function expectFamilyShape(
  path: string,
  reply: Reply,
  codes: { amp: string; fabric: string; amf: string; openai: string },
): void {
  if (path === '/api/amp/message' || path.startsWith('/api/amp/')) {
    expect(reply.body).toMatchObject({ amp: '1.0', status: 'error', error: { code: codes.amp } });
  } else if (path === '/mcp/call') {
    expect(reply.body).toMatchObject({ ok: false, result: null, error_code: codes.fabric });
    expect(typeof reply.body.error).toBe('string');
    expect((reply.body.trace as { trace_id: string }).trace_id).toMatch(/^[0-9a-f-]{36}$/);
  } else if (path === '/mcp' || path === '/a2a') {
    expect(reply.body).toMatchObject({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: expect.any(Number),
        message: expect.any(String),
        data: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: expect.any(String) }],
      },
    });
  } else if (path.startsWith('/a2a/rest/')) {
    expect(reply.body).toMatchObject({
      error: { code: reply.status, status: expect.stringMatching(/^[A-Z_]+$/), message: expect.any(String) },
    });
    expect((reply.body.error as { details: unknown[] }).details[0]).toMatchObject({
      reason: expect.any(String),
    });
  } else if (path.startsWith('/v1/')) {
    expect(reply.body).toMatchObject({
      error: { type: expect.any(String), code: codes.openai, message: expect.any(String) },
    });
  } else {
    expect(reply.body).toMatchObject({ error: { code: codes.amf } });
  }
}

const FAMILY_POSTS = [
  '/api/amp/message',
  '/mcp/call',
  '/mcp',
  '/a2a',
  '/a2a/rest/message:send',
  '/v1/chat/completions',
  '/publish',
];

describe('auth and size limits', () => {
  let mesh: TestMesh;
  beforeAll(async () => {
    mesh = await startTestMesh({
      config: {
        coordinator: { apiKey: KEY },
        http: { maxBodyBytes: 4096 },
        openai: { maxBodyBytes: 4096 },
        tasks: { maxTaskBytes: 4096 },
      },
    });
  }, 30_000);
  afterAll(() => mesh?.close());

  it.each(FAMILY_POSTS)('refuses POST %s with an unusable credential, in its family shape', async (path) => {
    const reply = await send(mesh, 'POST', path, '{}', undefined, 'Basic d3Jvbmc6a2V5');
    expect(reply.status).toBe(401);
    expect(reply.headers.get('www-authenticate')).toMatch(/^Bearer realm="amf"/);
    expectFamilyShape(path, reply, {
      amp: 'auth_failed',
      fabric: 'AUTH_DENIED',
      amf: 'UNAUTHORIZED',
      openai: 'unauthorized',
    });
  });

  it('refuses a wrong key on every route but /v1 on loopback (OpenAI SDKs always send a placeholder)', async () => {
    for (const path of FAMILY_POSTS) {
      const reply = await send(mesh, 'POST', path, '{}', 'wrong-key');
      if (path.startsWith('/v1/')) expect(reply.status, path).not.toBe(401);
      else expect(reply.status, path).toBe(401);
    }
    expect((await send(mesh, 'GET', '/agents', undefined, 'wrong-key')).status).toBe(401);
  });

  it('keeps client GET routes open on loopback without a key, operator routes closed', async () => {
    expect((await send(mesh, 'GET', '/api/amp/discover')).status).toBe(200);
    expect((await send(mesh, 'GET', '/api/amp/jobs/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await send(mesh, 'GET', '/v1/models')).status).toBe(200);
    for (const path of ['/agents', '/events/history', '/tasks', '/metrics', '/no-such-route']) {
      const reply = await send(mesh, 'GET', path);
      expect(reply.status, path).toBe(401);
      expect(reply.body).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
    }
  });

  it('leaves the agent cards and /health public, and lets the key through', async () => {
    for (const path of ['/health', '/.well-known/agent-card.json', '/.well-known/agent.json'])
      expect((await send(mesh, 'GET', path)).status, path).toBe(200);
    const discover = await send(mesh, 'GET', '/api/amp/discover', undefined, KEY);
    expect(discover.status).toBe(200);
    expect(discover.body).toMatchObject({ amp: '1.0', agents: [] });
    const health = await send(
      mesh,
      'POST',
      '/mcp/call',
      JSON.stringify({ name: 'fabric.health', arguments: {} }),
      KEY,
    );
    expect(health.body).toMatchObject({ ok: true, result: { status: 'ok', version: 'af-mcp-0.1' } });
  });

  it.each(FAMILY_POSTS)(
    'answers 413 for a declared oversized body on %s, in its family shape',
    async (path) => {
      const reply = await send(mesh, 'POST', path, JSON.stringify({ pad: 'x'.repeat(10_000) }), KEY);
      expect(reply.status).toBe(413);
      expectFamilyShape(path, reply, {
        amp: 'invalid_message',
        fabric: 'BAD_INPUT',
        amf: 'PAYLOAD_TOO_LARGE',
        openai: 'payload_too_large',
      });
      expect(String(JSON.stringify(reply.body))).toMatch(/exceeds the limit of 4096 bytes/);
    },
  );

  it('caps chunked bodies that declare no length while reading them', async () => {
    for (const path of ['/api/amp/message', '/mcp/call']) {
      const chunks = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < 10; i++) controller.enqueue(new TextEncoder().encode('x'.repeat(1000)));
          controller.close();
        },
      });
      const res = await fetch(`${mesh.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}` },
        body: chunks,
        duplex: 'half',
      } as RequestInit);
      expect(res.status, path).toBe(413);
      expectFamilyShape(
        path,
        { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> },
        {
          amp: 'invalid_message',
          fabric: 'BAD_INPUT',
          amf: 'PAYLOAD_TOO_LARGE',
          openai: 'payload_too_large',
        },
      );
    }
  });
});

/** A GET from a chosen loopback source address (rate limits are per client address). */
function getFrom(mesh: TestMesh, localAddress: string, path: string): Promise<number> {
  const url = new URL(path, mesh.url);
  return new Promise((resolve, reject) => {
    const req = request(url, { localAddress, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('rate limiting', () => {
  let mesh: TestMesh;
  beforeAll(async () => {
    // One request per 100 s with a burst of 4: the fifth request in a row is over the limit.
    mesh = await startTestMesh({ config: { http: { rateLimitPerSecond: 0.01, rateLimitBurst: 4 } } });
  }, 30_000);
  afterAll(() => mesh?.close());

  it('answers 429 with Retry-After after a burst, in each family shape, per client address', async () => {
    for (let i = 0; i < 4; i++) expect((await send(mesh, 'GET', '/health')).status).toBe(200);
    for (const path of FAMILY_POSTS) {
      const reply = await send(mesh, 'POST', path, '{}');
      expect(reply.status, path).toBe(429);
      const retryAfter = Number(reply.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(100);
      expectFamilyShape(path, reply, {
        amp: 'overloaded',
        fabric: 'RATE_LIMITED',
        amf: 'RATE_LIMITED',
        openai: 'rate_limited',
      });
    }
    // Public routes are limited too, but another client address has its own budget.
    expect((await send(mesh, 'GET', '/health')).status).toBe(429);
    expect(await getFrom(mesh, '127.0.0.2', '/health')).toBe(200);
  });
});
