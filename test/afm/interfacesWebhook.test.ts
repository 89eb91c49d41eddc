// The webhook interface over real HTTP: HMAC signatures (sha256/sha1/sha512 forms), JSON bodies,
// prompt templates with payload and header variables, sync and async answers, body size cap.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afm, recordingResponder, serveAgent } from './interfacesKit.js';
import { signBody } from '../../src/afm/interfaces/webhookSignature.js';
import type { RunningAgent } from '../../src/apps/afmAgentApp.js';
import { Router } from '../../src/http/httpKit.js';
import { serveRouter } from '../../src/edge/worker/workerHttp.js';
import { closeServer, listen } from '../../src/http/httpServer.js';
import { addWebhookRoutes } from '../../src/afm/interfaces/webhook.js';
import { compileSignature } from '../../src/afm/interfaces/signature.js';

const SECRET = 'hook-secret-123';
const FRONT = [
  'name: triage',
  'interfaces:',
  '  - type: webhook',
  '    prompt: "Event ${http:payload.event} on ${http:payload.repo[\'full.name\']} by ${http:header.X-Sender}; first label ${http:payload.labels[0]}"',
  '    subscription:',
  '      protocol: websub',
  '      secret: ${env:HOOK_SECRET}',
].join('\n');

describe('webhook', () => {
  const responder = recordingResponder((req) => ({ text: `triaged: ${String(req.input)}` }));
  let agent: RunningAgent & { url: string };
  beforeAll(async () => {
    agent = await serveAgent(afm(FRONT, { HOOK_SECRET: SECRET }), responder, { port: 0 });
  });
  afterAll(() => agent.close());

  const payload = JSON.stringify({ event: 'push', repo: { 'full.name': 'acme/app' }, labels: ['bug', 'p1'] });
  const deliver = (body: string, headers: Record<string, string>) =>
    fetch(`${agent.url}/webhook`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', ...headers },
    });

  it('answers a signed delivery with 200 {"result": ...} built from the template', async () => {
    const res = await deliver(payload, {
      'x-hub-signature-256': signBody(SECRET, payload),
      'x-sender': 'octocat',
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      result: 'triaged: Event push on acme/app by octocat; first label bug',
    });
    const req = responder.requests.at(-1)!;
    expect(req.sessionId).toMatch(/^webhook:/);
    expect(req.signature).toEqual({ input: { type: 'string' }, output: { type: 'string' } });
    expect(responder.ended).toContain(req.sessionId); // one delivery, one throwaway session
  });

  it('accepts the X-Hub-Signature sha1 and sha512 forms', async () => {
    for (const algorithm of ['sha1', 'sha512'] as const) {
      const res = await deliver(payload, {
        'x-hub-signature': signBody(SECRET, payload, algorithm),
        'x-sender': 'a',
      });
      expect(res.status, algorithm).toBe(200);
    }
  });

  it('answers 401 for a missing, malformed or wrong signature, before reading the JSON', async () => {
    const before = responder.requests.length;
    const cases: [Record<string, string>, string][] = [
      [{}, 'missing signature'],
      [{ 'x-hub-signature-256': 'md5=abcd' }, 'malformed signature'],
      [{ 'x-hub-signature-256': signBody('wrong-secret', payload) }, 'signature mismatch'],
      [{ 'x-hub-signature-256': signBody(SECRET, payload + ' ') }, 'signature mismatch'],
      [{ 'x-hub-signature-256': 'sha256=abcd' }, 'signature mismatch'],
    ];
    for (const [headers, message] of cases) {
      const res = await deliver(payload, { 'x-sender': 'a', ...headers });
      expect(res.status, message).toBe(401);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error).toMatchObject({ code: 'UNAUTHORIZED' });
      expect(body.error.message).toContain(message);
    }
    // Not signed = not parsed: bad JSON without a signature is still 401.
    expect((await deliver('{not json', {})).status).toBe(401);
    expect(responder.requests.length).toBe(before);
  });

  it('answers 400 for a body that is not JSON', async () => {
    const bad = '{"event": push}';
    const res = await deliver(bad, { 'x-hub-signature-256': signBody(SECRET, bad) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain('not valid JSON');
    const form = 'a=1';
    const wrongType = await fetch(`${agent.url}/webhook`, {
      method: 'POST',
      body: form,
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'x-hub-signature-256': signBody(SECRET, form),
      },
    });
    expect(wrongType.status).toBe(400);
  });

  it('answers 400 naming the missing payload field or header', async () => {
    const noEvent = JSON.stringify({ repo: { 'full.name': 'x' }, labels: ['a'] });
    const r1 = await deliver(noEvent, { 'x-hub-signature-256': signBody(SECRET, noEvent), 'x-sender': 'a' });
    expect(r1.status).toBe(400);
    const e1 = ((await r1.json()) as { error: { message: string; variable?: string } }).error;
    expect(e1.message).toMatch(/cannot build the prompt from this delivery: .*event/);
    expect(e1.variable).toBe('${http:payload.event}');
    const r2 = await deliver(payload, { 'x-hub-signature-256': signBody(SECRET, payload) });
    expect(r2.status).toBe(400);
    expect(((await r2.json()) as { error: { message: string } }).error.message).toMatch(/X-Sender/i);
    const emptyLabels = JSON.stringify({ event: 'e', repo: { 'full.name': 'x' }, labels: [] });
    const r3 = await deliver(emptyLabels, {
      'x-hub-signature-256': signBody(SECRET, emptyLabels),
      'x-sender': 'a',
    });
    expect(r3.status).toBe(400);
    expect(((await r3.json()) as { error: { message: string } }).error.message).toMatch(/index|bounds/i);
  });

  it('acknowledges at once with 202 when the sender prefers respond-async', async () => {
    const before = responder.requests.length;
    const res = await deliver(payload, {
      'x-hub-signature-256': signBody(SECRET, payload),
      'x-sender': 'a',
      prefer: 'respond-async',
    });
    expect(res.status).toBe(202);
    const body = (await res.json()) as { status: string; delivery: string };
    expect(body.status).toBe('accepted');
    await expect.poll(() => responder.requests.length).toBe(before + 1);
    expect(responder.requests.at(-1)!.sessionId).toBe(`webhook:${body.delivery}`);
  });

  it('refuses a body over the size limit with 413', async () => {
    const big = JSON.stringify({ event: 'x', blob: 'y'.repeat(1024 * 1024 + 10) });
    const res = await deliver(big, { 'x-hub-signature-256': signBody(SECRET, big) });
    expect(res.status).toBe(413);
  });
});

describe('webhook without a template or secret', () => {
  it('sends the pretty-printed payload and answers an object output as itself', async () => {
    const responder = recordingResponder(() => ({ output: { severity: 'low', summary: 's' }, text: '{}' }));
    const agent = await serveAgent(
      afm(
        [
          'interfaces:',
          '  - type: webhook',
          '    exposure: { http: { path: /hooks/ci } }',
          '    signature:',
          '      output: { type: object, properties: { severity: { type: string } }, required: [severity] }',
        ].join('\n'),
      ),
      responder,
    );
    try {
      const res = await fetch(`${agent.url}/hooks/ci`, { method: 'POST', body: '{"build":42,"ok":false}' });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ severity: 'low', summary: 's' });
      expect(responder.requests[0]!.input).toBe(JSON.stringify({ build: 42, ok: false }, null, 2));
      // No subscription: GET is not a WebSub callback here.
      expect((await fetch(`${agent.url}/hooks/ci?hub.mode=subscribe&hub.challenge=x`)).status).toBe(404);
    } finally {
      await agent.close();
    }
  });
});

describe('webhook run limits', () => {
  it('answers 503 while maxRuns deliveries are being handled', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started = 0;
    const responder = {
      respond: async () => {
        started++;
        await gate;
        return { output: 'done', text: 'done' };
      },
    };
    const router = new Router();
    addWebhookRoutes(router, {
      path: '/hook',
      responder,
      signature: compileSignature({ input: {} }),
      maxRuns: 1,
    });
    const server = serveRouter(router);
    const url = await listen(server, '127.0.0.1', 0);
    try {
      const first = fetch(`${url}/hook`, { method: 'POST', body: '{"n":1}' });
      await expect.poll(() => started).toBe(1);
      const second = await fetch(`${url}/hook`, { method: 'POST', body: '{"n":2}' });
      expect(second.status).toBe(503);
      expect(((await second.json()) as { error: { code: string } }).error.code).toBe('OVERLOADED');
      release();
      expect(await (await first).json()).toEqual({ result: 'done' });
      const third = await fetch(`${url}/hook`, { method: 'POST', body: '{"n":3}' });
      expect(third.status).toBe(200);
    } finally {
      release();
      await closeServer(server);
    }
  });
});
