// Our A2A client (src/a2aClient) against the official @a2a-js/sdk server as the reference
// implementation: both bindings, protocol 1.0 and 0.3, every answer shape, cancellation, and the
// guards on what a remote agent may make us fetch.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AmfError } from '../../src/errors.js';
import { fetchAgentCard } from '../../src/a2aClient/agentCard.js';
import { RemoteA2aAgent, type StreamUpdate } from '../../src/a2aClient/remoteAgent.js';
import { startReferenceAgent, type ReferenceAgent } from './referenceAgent.js';

async function collect(stream: AsyncIterable<StreamUpdate>): Promise<StreamUpdate[]> {
  const out: StreamUpdate[] = [];
  for await (const step of stream) out.push(step);
  return out;
}

async function rejection(p: Promise<unknown>): Promise<AmfError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AmfError);
    return err as AmfError;
  }
  throw new Error('expected a rejection');
}

/** A plain HTTP server answering every request with `respond`. */
async function plainServer(
  respond: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void,
): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer(respond);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

describe('A2A client against the @a2a-js/sdk reference server (protocol 1.0, JSON-RPC)', () => {
  let ref: ReferenceAgent;
  let agent: RemoteA2aAgent;

  beforeAll(async () => {
    ref = await startReferenceAgent();
    agent = await RemoteA2aAgent.connect(ref.url);
  });
  afterAll(async () => {
    await ref?.close();
  });

  it('reads the card: name, skills, the preferred binding and version', () => {
    expect(agent.card.name).toBe('Reference Agent');
    expect(agent.cardUrl).toBe(`${ref.url}/.well-known/agent-card.json`);
    expect(agent.skills.map((s) => s.id)).toEqual(['shout']);
    expect(agent.protocolBinding).toBe('JSONRPC');
    expect(agent.protocolVersion).toBe('1.0');
  });

  it('sends a blocking message and maps the completed task (artifact chunks joined)', async () => {
    const reply = await agent.send('hello there', { metadata: { tag: 'shout' } });
    expect(reply).toMatchObject({ kind: 'task', state: 'completed', text: 'ref: HELLO THERE' });
    expect(reply.taskId).toMatch(/.+/);
    expect(reply.contextId).toMatch(/.+/);
    const received = ref.received.at(-1)!;
    expect(received.metadata).toEqual({ tag: 'shout' });
    expect(received.parts[0]?.content).toEqual({ $case: 'text', value: 'hello there' });
  });

  it('streams: progress from the working status, artifact deltas in order, then the whole reply', async () => {
    const steps = await collect(agent.stream('stream me'));
    expect(steps.filter((s) => s.progress).map((s) => s.progress)).toEqual(['thinking']);
    expect(steps.filter((s) => s.delta).map((s) => s.delta)).toEqual(['ref:', ' STREAM ME']);
    const last = steps.at(-1)!;
    expect(last.reply).toMatchObject({ kind: 'task', state: 'completed', text: 'ref: STREAM ME' });
  });

  it('maps a direct Message answer (blocking and streamed)', async () => {
    expect(await agent.send('direct: ping')).toMatchObject({
      kind: 'message',
      state: 'completed',
      text: 'direct answer to ping',
    });
    const steps = await collect(agent.stream('direct: pong'));
    expect(steps.at(-1)!.reply).toMatchObject({ kind: 'message', text: 'direct answer to pong' });
  });

  it('takes the answer from the final status message when a task has no artifacts', async () => {
    expect(await agent.send('status: only')).toMatchObject({
      state: 'completed',
      text: 'status answer only',
    });
    const steps = await collect(agent.stream('status: streamed'));
    expect(steps.some((s) => s.delta)).toBe(false);
    expect(steps.at(-1)!.reply).toMatchObject({ state: 'completed', text: 'status answer streamed' });
  });

  it('reports failed and input-required tasks with their status text', async () => {
    expect(await agent.send('fail: broken tool')).toMatchObject({ state: 'failed', text: 'broken tool' });
    expect(await agent.send('input: which city?')).toMatchObject({
      state: 'input-required',
      text: 'which city?',
    });
  });

  it('cancels the remote task when the caller aborts a stream', async () => {
    const controller = new AbortController();
    const seen: StreamUpdate[] = [];
    const err = await rejection(
      (async () => {
        for await (const step of agent.stream('wait', { signal: controller.signal })) {
          seen.push(step);
          if (step.state === 'working') controller.abort();
        }
      })(),
    );
    expect(err.code).toBe('UNAVAILABLE');
    expect(err.message).toMatch(/cancelled/);
    const deadline = Date.now() + 10_000;
    while (ref.cancelled.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(ref.cancelled).toHaveLength(1);
  });

  it('a send with a deadline that passes ends in TIMEOUT, naming the agent', async () => {
    const err = await rejection(agent.send('wait', { timeoutMs: 300 }));
    expect(err.code).toBe('TIMEOUT');
    expect(err.message).toContain('Reference Agent');
  });
});

describe('A2A client: other bindings and protocol versions of the reference server', () => {
  const agents: ReferenceAgent[] = [];
  afterAll(async () => {
    await Promise.all(agents.map((a) => a.close()));
  });

  it('HTTP+JSON (REST) when the card prefers it', async () => {
    const ref = await startReferenceAgent({ preferred: 'HTTP+JSON' });
    agents.push(ref);
    const agent = await RemoteA2aAgent.connect(ref.url);
    expect(agent.protocolBinding).toBe('HTTP+JSON');
    expect(await agent.send('rest call')).toMatchObject({ state: 'completed', text: 'ref: REST CALL' });
    const steps = await collect(agent.stream('rest stream'));
    expect(steps.at(-1)!.reply).toMatchObject({ state: 'completed', text: 'ref: REST STREAM' });
  });

  it.each(['JSONRPC', 'HTTP+JSON'] as const)(
    'protocol 0.3 over %s (the SDK compatibility layer)',
    async (preferred) => {
      const ref = await startReferenceAgent({ protocolVersion: '0.3', preferred });
      agents.push(ref);
      const agent = await RemoteA2aAgent.connect(ref.url);
      expect(agent.protocolVersion).toBe('0.3');
      expect(agent.protocolBinding).toBe(preferred);
      expect(await agent.send('old wire')).toMatchObject({ state: 'completed', text: 'ref: OLD WIRE' });
      const steps = await collect(agent.stream('old stream'));
      expect(steps.filter((s) => s.delta).map((s) => s.delta)).toEqual(['ref:', ' OLD STREAM']);
      expect(steps.at(-1)!.reply).toMatchObject({ state: 'completed', text: 'ref: OLD STREAM' });
    },
  );

  it('a card naming localhost for an agent reached at 127.0.0.1 counts as the same host', async () => {
    const ref = await startReferenceAgent({
      interfaceUrl: (base, binding) => `${base.replace('127.0.0.1', 'localhost')}/a2a/${binding}`,
    });
    agents.push(ref);
    const agent = await RemoteA2aAgent.connect(ref.url);
    expect(agent.card.supportedInterfaces[0]!.url).toContain('//localhost:');
    expect(await agent.send('loopback')).toMatchObject({ state: 'completed', text: 'ref: LOOPBACK' });
  });
});

describe('A2A client guards', () => {
  const closers: Array<() => Promise<void>> = [];
  afterAll(async () => {
    await Promise.all(closers.map((c) => c()));
  });

  it('refuses a card whose interfaces point at another host (no request goes there)', async () => {
    const ref = await startReferenceAgent({ interfaceUrl: () => 'http://10.255.255.1:9/a2a' });
    closers.push(ref.close);
    const agent = await RemoteA2aAgent.connect(ref.url);
    const err = await rejection(agent.send('hi'));
    expect(err.code).toBe('INVALID_REQUEST');
    expect(err.message).toContain('is not the host its card came from');
  });

  it('refuses metadata and link-local hosts, non-http schemes and credentials in the URL', async () => {
    for (const url of [
      'http://169.254.169.254/',
      'http://metadata.google.internal/',
      'http://[fe80::1]/',
      'file:///etc/passwd',
      'http://user:pw@127.0.0.1/',
    ]) {
      const err = await rejection(fetchAgentCard(url));
      expect(err.code, url).toBe('INVALID_REQUEST');
    }
  });

  it('bounds the card size, refuses redirects and non-JSON, and names what it tried on 404', async () => {
    const big = await plainServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ name: 'x', pad: 'a'.repeat(300 * 1024) }));
    });
    const redirect = await plainServer((_req, res) => {
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data' });
      res.end();
    });
    const notJson = await plainServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>hi</html>');
    });
    const missing = await plainServer((_req, res) => {
      res.writeHead(404);
      res.end();
    });
    const noInterfaces = await plainServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ name: 'empty', supportedInterfaces: [] }));
    });
    closers.push(big.close, redirect.close, notJson.close, missing.close, noInterfaces.close);
    expect((await rejection(fetchAgentCard(big.url))).code).toBe('PAYLOAD_TOO_LARGE');
    const r = await rejection(fetchAgentCard(redirect.url));
    expect(r.code).toBe('UNAVAILABLE');
    expect(r.message).toContain('redirect');
    expect((await rejection(fetchAgentCard(notJson.url))).message).toContain('is not JSON');
    const m = await rejection(fetchAgentCard(missing.url));
    expect(m.code).toBe('NOT_FOUND');
    expect(m.message).toContain('.well-known/agent-card.json');
    expect(m.message).toContain('.well-known/agent.json');
    expect((await rejection(fetchAgentCard(noInterfaces.url))).message).toContain('lists no interface');
  });

  it('a card that never comes ends in TIMEOUT; a closed port in UNAVAILABLE', async () => {
    const silent = await plainServer(() => undefined);
    closers.push(silent.close);
    expect((await rejection(fetchAgentCard(silent.url, { timeoutMs: 200 }))).code).toBe('TIMEOUT');
    const gone = await plainServer(() => undefined);
    await gone.close();
    const err = await rejection(fetchAgentCard(gone.url));
    expect(err.code).toBe('UNAVAILABLE');
    expect(err.message).toContain('ECONNREFUSED');
  });
});
