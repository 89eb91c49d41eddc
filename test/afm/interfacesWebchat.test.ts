// The webchat interface over real HTTP: sessions, signatures, content types, SSE streaming, the chat
// page and its CSP, and the agent info routes. The agent is a tiny in-process responder.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afm, parseSse, recordingResponder, serveAgent } from './interfacesKit.js';
import type { RunningAgent } from '../../src/apps/afmAgentApp.js';

describe('webchat, string → string', () => {
  const responder = recordingResponder();
  let agent: RunningAgent & { url: string };
  beforeAll(async () => {
    agent = await serveAgent(afm('name: Chatty\ninterfaces:\n  - type: webchat'), responder);
  });
  afterAll(() => agent.close());

  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(`${agent.url}/chat`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'text/plain', ...headers },
    });

  it('answers text/plain with text/plain and keeps sessions apart by X-Session-Id', async () => {
    const a1 = await post('hello', { 'x-session-id': 'alice' });
    expect(a1.status).toBe(200);
    expect(a1.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(a1.headers.get('x-session-id')).toBe('alice');
    expect(await a1.text()).toBe('turn 1 of webchat:alice: hello');
    expect(await (await post('again', { 'x-session-id': 'alice' })).text()).toBe(
      'turn 2 of webchat:alice: again',
    );
    expect(await (await post('hi', { 'x-session-id': 'bob' })).text()).toBe('turn 1 of webchat:bob: hi');
    // No header: the shared "default" session.
    expect(await (await post('x')).text()).toBe('turn 1 of webchat:default: x');
  });

  it('takes a JSON string too, and passes the interface signature to the agent', async () => {
    const res = await fetch(`${agent.url}/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 'json' },
      body: JSON.stringify('as json'),
    });
    expect(await res.text()).toBe('turn 1 of webchat:json: as json');
    expect(responder.requests.at(-1)?.signature).toEqual({
      input: { type: 'string' },
      output: { type: 'string' },
    });
  });

  it('refuses empty bodies, other content types, JSON that is not a string and bad session ids', async () => {
    const cases: [RequestInit, string][] = [
      [{ body: '', headers: { 'content-type': 'text/plain' } }, 'empty'],
      [{ body: '<a/>', headers: { 'content-type': 'application/xml' } }, 'Content-Type'],
      [{ body: '{"a":1}', headers: { 'content-type': 'application/json' } }, 'string input'],
      [{ body: '{oops', headers: { 'content-type': 'application/json' } }, 'not valid JSON'],
      [{ body: 'hi', headers: { 'content-type': 'text/plain', 'x-session-id': 'bad id!' } }, 'X-Session-Id'],
    ];
    for (const [init, message] of cases) {
      const res = await fetch(`${agent.url}/chat`, { method: 'POST', ...init });
      expect(res.status, message).toBe(400);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('INVALID_REQUEST');
      expect(body.error.message).toContain(message);
    }
  });

  it('streams SSE when asked: delta events that add up to the answer, then done', async () => {
    const res = await post('stream me', { accept: 'text/event-stream', 'x-session-id': 'sse' });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = parseSse(await res.text());
    const deltas = events.filter((e) => e.event === 'delta').map((e) => (e.data as { text: string }).text);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe('turn 1 of webchat:sse: stream me');
    expect(events.at(-1)).toEqual({
      event: 'done',
      data: { output: 'turn 1 of webchat:sse: stream me', text: 'turn 1 of webchat:sse: stream me' },
    });
  });

  it('serves a self-contained chat page under a strict CSP whose nonce matches its only script', async () => {
    const res = await fetch(`${agent.url}/chat/ui`);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
    const nonce = /script-src 'nonce-([^']+)'/.exec(csp)?.[1];
    expect(nonce).toBeTruthy();
    const html = await res.text();
    expect(html.match(/<script/g)).toHaveLength(1);
    expect(html).toContain(`<script nonce="${nonce}">`);
    expect(html).not.toMatch(/(src|href)="https?:/);
    expect(html).toContain('Chatty');
  });

  it('answers GET / with the agent info and GET /health', async () => {
    const info = (await (await fetch(`${agent.url}/`)).json()) as Record<string, unknown>;
    expect(info).toMatchObject({
      name: 'Chatty',
      version: '0.0.0',
      interfaces: { webchat: { path: '/chat', ui: '/chat/ui' } },
      mesh: null,
    });
    expect(await (await fetch(`${agent.url}/health`)).json()).toMatchObject({ status: 'ok' });
  });
});

describe('webchat, structured signatures', () => {
  const responder = recordingResponder((req) =>
    req.sessionId.endsWith(':text')
      ? { text: 'plain words' }
      : {
          output: { reply: `got ${(req.input as { message: string }).message}`, confidence: 0.5 },
          text: '{}',
        },
  );
  let agent: RunningAgent & { url: string };
  beforeAll(async () => {
    agent = await serveAgent(
      afm(
        [
          'interfaces:',
          '  - type: webchat',
          '    exposure: { http: { path: /ask } }',
          '    signature:',
          '      input: { type: object, properties: { message: { type: string } }, required: [message] }',
          '      output: { type: object, properties: { reply: { type: string } }, required: [reply] }',
        ].join('\n'),
      ),
      responder,
    );
  });
  afterAll(() => agent.close());

  it('needs application/json and answers the output object as JSON', async () => {
    const plain = await fetch(`${agent.url}/ask`, {
      method: 'POST',
      body: 'hi',
      headers: { 'content-type': 'text/plain' },
    });
    expect(plain.status).toBe(400);
    expect(((await plain.json()) as { error: { message: string } }).error.message).toContain(
      'application/json',
    );
    const res = await fetch(`${agent.url}/ask`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'ping' }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ reply: 'got ping', confidence: 0.5 });
  });

  it('refuses input that does not match signature.input, naming the problem', async () => {
    const res = await fetch(`${agent.url}/ask`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ msg: 'x' }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /required property 'message'/,
    );
    expect(responder.requests).toHaveLength(1); // the bad one never reached the agent
  });

  it('wraps a string output as {"response": ...}', async () => {
    const res = await fetch(`${agent.url}/ask`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 'text' },
      body: JSON.stringify({ message: 'x' }),
    });
    expect(await res.json()).toEqual({ response: 'plain words' });
  });
});

describe('webchat, surfacing a stopped run', () => {
  it('sets x-afm-stop-reason and reports stop_reason in the SSE done event', async () => {
    const responder = recordingResponder(() => ({ text: '[Stopped: limit]', stopReason: 'max_iterations' }));
    const agent = await serveAgent(afm('interfaces:\n  - type: webchat'), responder);
    try {
      const res = await fetch(`${agent.url}/chat`, { method: 'POST', body: 'loop' });
      expect(res.headers.get('x-afm-stop-reason')).toBe('max_iterations');
      expect(await res.text()).toBe('[Stopped: limit]');
      const sse = await fetch(`${agent.url}/chat`, {
        method: 'POST',
        body: 'loop',
        headers: { accept: 'text/event-stream' },
      });
      expect(parseSse(await sse.text()).at(-1)).toMatchObject({
        event: 'done',
        data: { stop_reason: 'max_iterations' },
      });
    } finally {
      await agent.close();
    }
  });
});
