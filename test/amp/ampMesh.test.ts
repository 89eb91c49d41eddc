/**
 * AMP end to end on a real mesh (nats-server, coordinator, workers over NATS, HTTP on 127.0.0.1):
 * intent routing to an echo worker, confidence and uncertainty carried from the worker's final event
 * into the AMP response, trust levels (a read-only sender reaches only an agent whose card marks its
 * capability read-only), deferred replies POSTed to a local reply_to server and polled, discover, and
 * the merged A2A card / AMP manifest at /.well-known/agent.json.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { MeshWorker } from '../../src/worker/meshWorker.js';
import { AMP_EXTENSION_URI, type AmpResponse } from '../../src/protocols/amp/ampMessage.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

/** A forecaster that is honest about its doubts: the confidence fixture. */
const forecastHandler: WorkerHandler = {
  name: 'forecast',
  description: 'Weather forecasts for a city',
  handle: async () => ({
    text: 'rain likely tomorrow',
    confidence: 0.42,
    data: { uncertainty: { note: 'only one weather model was consulted', recommend: 'check the radar' } },
  }),
};

const lookupHandler: WorkerHandler = {
  name: 'lookup',
  description: 'Looks words up in a dictionary (reads only)',
  handle: async (ctx) => ({ text: `definition of ${ctx.text}`, confidence: 0.95 }),
};

/** Holds its answer until the test releases it, so a job can be seen running. */
let releaseSlow: (() => void) | undefined;
const slowHandler: WorkerHandler = {
  name: 'slow',
  description: 'answers when released',
  handle: (ctx) =>
    new Promise((resolve) => {
      releaseSlow = () => resolve({ text: `slow answer to ${ctx.text}`, confidence: 0.7 });
    }),
};

let mesh: TestMesh;
let cardServer: Server;
let readerWorker: MeshWorker;

interface Received {
  body: AmpResponse;
  headers: IncomingMessage['headers'];
}
let replyServer: Server;
let replyUrl = '';
const replies: Received[] = [];
const replyWaiters: Array<(r: Received) => void> = [];
let failNextReplies = 0;

function listenLocal(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    ),
  );
}

function message(fields: Record<string, unknown>): Record<string, unknown> {
  return {
    amp: '1.0',
    id: `msg_${Math.random().toString(16).slice(2, 14)}`,
    from: { id: 'test-agent', name: 'AMP test', type: 'agent' },
    to: 'amf-coordinator',
    timestamp: new Date().toISOString(),
    ...fields,
  };
}

async function post(body: unknown): Promise<{ status: number; body: AmpResponse & Record<string, unknown> }> {
  const res = await fetch(`${mesh.url}/api/amp/message`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as AmpResponse & Record<string, unknown> };
}

function nextReply(): Promise<Received> {
  const ready = replies.shift();
  if (ready) return Promise.resolve(ready);
  return new Promise((resolve) => replyWaiters.push(resolve));
}

beforeAll(async () => {
  mesh = await startTestMesh({ config: { http: { requestTimeoutSeconds: 10 } } });
  await mesh.startWorker('echo-1', ['echo'], echoHandler);
  await mesh.startWorker('forecast-1', ['forecast'], forecastHandler);
  await mesh.startWorker('slow-1', ['slow'], slowHandler);
  // An agent whose own card marks its capability read-only (x-amf.read_only): a real MeshWorker
  // behind a card server the coordinator fetches after admission.
  let endpoint = '';
  cardServer = createServer((req, res) => {
    if (req.url !== '/.well-known/agent-card.json') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        name: 'reader-1',
        description: 'dictionary lookups',
        url: endpoint,
        skills: [
          { id: 'lookup', name: 'lookup', description: 'Looks words up in a dictionary', tags: ['lookup'] },
        ],
        'x-amf': { agent_id: 'spiffe://local/worker/reader-1', read_only: true },
      }),
    );
  });
  endpoint = await listenLocal(cardServer);
  const nc = await mesh.connect('specialist', 'reader-1');
  readerWorker = new MeshWorker(nc, {
    name: 'reader-1',
    tags: ['lookup'],
    trustDomain: 'local',
    endpoint,
    handler: lookupHandler,
    heartbeatSeconds: 1,
    concurrency: 4,
  });
  await readerWorker.start();
  await mesh.waitFor(() => mesh.coordinator.registry.get(readerWorker.agentId)?.card, 10_000, 'reader card');
  replyServer = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (failNextReplies > 0) {
        failNextReplies--;
        res.writeHead(503).end();
        return;
      }
      res.writeHead(204).end();
      const r = {
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as AmpResponse,
        headers: req.headers,
      };
      const waiter = replyWaiters.shift();
      if (waiter) waiter(r);
      else replies.push(r);
    });
  });
  replyUrl = `${await listenLocal(replyServer)}/amp/replies`;
}, 60_000);

afterAll(async () => {
  releaseSlow?.();
  await readerWorker?.drain(1000);
  await mesh?.close();
  cardServer?.close();
  replyServer?.close();
});

describe('POST /api/amp/message', () => {
  it('routes an intent to the echo worker through the mesh and answers ok', async () => {
    const { status, body } = await post(message({ intent: 'echo hello mesh', trace_id: 'trace_ab12cd34' }));
    expect(status).toBe(200);
    expect(body).toMatchObject({
      amp: '1.0',
      status: 'ok',
      from: { id: mesh.coordinator.sender.identity },
      trace_id: 'trace_ab12cd34',
      result: { text: 'echo hello mesh', capability: 'echo', agent_id: 'spiffe://local/worker/echo-1' },
    });
    expect(body.in_reply_to).toMatch(/^msg_/);
    expect(body.confidence).toBe(1); // the echo handler reports no confidence: the envelope default
    const taskId = (body.result as { task_id: string }).task_id;
    // The task really crossed NATS: announced on the routed tag's subject, finished by the worker.
    await mesh.waitForEvent((e) => e.subject === 'amf.task.announce.echo' && e.event.amftaskid === taskId);
    await mesh.waitForEvent((e) => e.subject === 'amf.result.final' && e.event.amftaskid === taskId);
  });

  it('carries the worker confidence and uncertainty into the response as partial', async () => {
    const { status, body } = await post(
      message({
        intent: 'What is the weather forecast for Lisbon?',
        context: { background: 'planning a trip' },
      }),
    );
    expect(status).toBe(200);
    expect(body.status).toBe('partial');
    expect(body.confidence).toBe(0.42);
    expect(body.uncertainty).toEqual({
      note: 'only one weather model was consulted',
      recommend: 'check the radar',
    });
    const taskId = (body.result as { task_id: string }).task_id;
    const final = await mesh.waitForEvent(
      (e) => e.subject === 'amf.result.final' && e.event.amftaskid === taskId,
    );
    expect(final.event.amfconfidence).toBe('0.42');
  });

  it('uses a UUID trace_id as the task amftraceid', async () => {
    const traceId = '4bf92f35-77b3-4da6-a3ce-929d0e0e4736';
    const { body } = await post(message({ intent: 'echo traced', trace_id: traceId }));
    expect(body.trace_id).toBe(traceId);
    const taskId = (body.result as { task_id: string }).task_id;
    const announce = await mesh.waitForEvent(
      (e) => e.subject === 'amf.task.announce.echo' && e.event.amftaskid === taskId,
    );
    expect(announce.event.amftraceid).toBe(traceId);
  });

  it('refuses an intent no capability matches with capability_mismatch', async () => {
    const { status, body } = await post(message({ intent: 'book me a flight to Lisbon' }));
    expect(status).toBe(200);
    expect(body).toMatchObject({ status: 'refused', error: { code: 'capability_mismatch' } });
    expect(body.error?.message).toMatch(/live capabilities: .*echo/);
  });

  it('answers invalid messages with the spec error codes and HTTP 400', async () => {
    const missing = await post({
      amp: '1.0',
      id: 'msg_x',
      from: { id: 'a' },
      to: 'b',
      timestamp: new Date().toISOString(),
    });
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({
      status: 'error',
      in_reply_to: 'msg_x',
      error: { code: 'invalid_message', message: 'Missing required field: intent' },
    });
    const unclear = await post(message({ intent: '' }));
    expect(unclear.body.error?.code).toBe('intent_unclear');
    const expired = await post(message({ intent: 'echo late', timestamp: '2020-01-01T00:00:00Z', ttl: 60 }));
    expect(expired.body).toMatchObject({ status: 'error', error: { code: 'expired' } });
    const res = await fetch(`${mesh.url}/api/amp/message`, { method: 'POST', body: '{not json' });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      amp: '1.0',
      status: 'error',
      error: { code: 'invalid_message' },
    });
  });
});

describe('trust levels', () => {
  it('refuses a read-only sender a capability that is not marked read-only', async () => {
    // The forecaster does not declare itself read-only (the built-in echo handler does).
    const { status, body } = await post(
      message({ intent: 'What is the weather forecast for Lisbon?', trust: { level: 'read-only' } }),
    );
    expect(status).toBe(200);
    expect(body).toMatchObject({ status: 'refused', error: { code: 'trust_insufficient' } });
    expect(body.error?.message).toMatch(/"forecast" is not read-only/);
    // Refused before dispatch: no task was announced for it.
    expect(body.result).toBeUndefined();
  });

  it('lets a read-only sender reach the built-in echo handler, which declares itself read-only', async () => {
    const { body } = await post(message({ intent: 'echo this', trust: { level: 'read-only' } }));
    expect(body).toMatchObject({ status: 'ok', result: { capability: 'echo', text: 'echo this' } });
  });

  it('lets a read-only sender reach a capability whose agents mark it read-only', async () => {
    const { body } = await post(
      message({ intent: 'lookup the word serendipity', trust: { level: 'read-only' } }),
    );
    expect(body).toMatchObject({
      status: 'ok',
      confidence: 0.95,
      result: { capability: 'lookup', text: 'definition of lookup the word serendipity' },
    });
  });

  it('enforces trust.allowlist for read-write senders', async () => {
    const { body } = await post(
      message({ intent: 'echo hi', trust: { level: 'read-write', allowlist: ['lookup'] } }),
    );
    expect(body).toMatchObject({ status: 'refused', error: { code: 'trust_insufficient' } });
  });
});

describe('deferred replies', () => {
  it('answers deferred at once, POSTs the result to reply_to (retrying a 503) and keeps it for polling', async () => {
    failNextReplies = 1;
    const sent = message({ intent: 'slow please', context: { capability: 'slow' }, reply_to: replyUrl });
    const { status, body } = await post(sent);
    expect(status).toBe(202);
    expect(body.status).toBe('deferred');
    const jobId = (body.result as { job_id: string }).job_id;
    expect(jobId).toMatch(/^[0-9a-f-]{36}$/);
    // While the worker holds the answer the job is running.
    await mesh.waitFor(() => releaseSlow, 10_000, 'slow handler started');
    const running = await (await fetch(`${mesh.url}/api/amp/jobs/${jobId}`)).json();
    expect(running).toMatchObject({
      status: 'deferred',
      job_id: jobId,
      in_reply_to: sent.id,
      result: { state: 'running' },
    });
    releaseSlow!();
    const reply = await nextReply();
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.body).toMatchObject({
      amp: '1.0',
      status: 'ok',
      in_reply_to: sent.id,
      confidence: 0.7,
      result: { text: 'slow answer to slow please' },
    });
    const polled = await mesh.waitFor(async () => {
      const j = (await (await fetch(`${mesh.url}/api/amp/jobs/${jobId}`)).json()) as Record<string, unknown>;
      return (j.delivery as { state?: string } | undefined)?.state === 'delivered' ? j : undefined;
    });
    expect(polled).toMatchObject({
      status: 'ok',
      id: reply.body.id,
      delivery: { state: 'delivered', attempts: 2 },
    });
  });

  it('polls a sync:false request without reply_to', async () => {
    const { status, body } = await post(message({ intent: 'echo later', sync: false }));
    expect(status).toBe(202);
    const jobId = (body.result as { job_id: string }).job_id;
    const done = await mesh.waitFor(async () => {
      const j = (await (await fetch(`${mesh.url}/api/amp/jobs/${jobId}`)).json()) as AmpResponse;
      return j.status === 'ok' ? j : undefined;
    });
    expect(done.result).toMatchObject({ text: 'echo later' });
  });

  it('refuses a reply_to at a metadata address and 404s unknown jobs', async () => {
    const { status, body } = await post(
      message({ intent: 'echo x', reply_to: 'http://169.254.169.254/latest/meta-data' }),
    );
    expect(status).toBe(400);
    expect(body).toMatchObject({ status: 'error', error: { code: 'invalid_message' } });
    expect(body.error?.message).toMatch(/link-local/);
    const res = await fetch(`${mesh.url}/api/amp/jobs/00000000-0000-4000-8000-000000000000`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ status: 'error', error: { code: 'not_found' } });
  });
});

describe('discovery', () => {
  it('GET /api/amp/discover lists live agents by capability and by words', async () => {
    const byCap = (await (await fetch(`${mesh.url}/api/amp/discover?capability=lookup`)).json()) as {
      agents: Array<Record<string, unknown>>;
      count: number;
    };
    expect(byCap.count).toBe(1);
    expect(byCap.agents[0]).toMatchObject({
      id: readerWorker.agentId,
      capabilities: ['lookup'],
      read_only_capabilities: ['lookup'],
      amp_endpoint: `${mesh.url}/api/amp/message`,
    });
    const byWords = (await (await fetch(`${mesh.url}/api/amp/discover?q=dictionary&limit=5`)).json()) as {
      agents: Array<{ id: string }>;
    };
    expect(byWords.agents.map((a) => a.id)).toEqual([readerWorker.agentId]);
    const all = (await (await fetch(`${mesh.url}/api/amp/discover`)).json()) as { count: number };
    expect(all.count).toBeGreaterThanOrEqual(4);
    const bad = await fetch(`${mesh.url}/api/amp/discover?limit=500`);
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ status: 'error', error: { code: 'invalid_message' } });
  });

  it('answers a type "discover" message from the registry', async () => {
    const { body } = await post(message({ intent: 'dictionary', type: 'discover' }));
    expect(body.status).toBe('ok');
    expect((body.result as { agents: Array<{ id: string }> }).agents.map((a) => a.id)).toContain(
      readerWorker.agentId,
    );
  });

  it('serves one /.well-known/agent.json for A2A card readers and AMP clients', async () => {
    const doc = (await (await fetch(`${mesh.url}/.well-known/agent.json`)).json()) as {
      amp_capabilities: string[];
      name: unknown;
      capabilities: { streaming?: boolean; extensions: Array<{ uri: string }> };
      skills: Array<{ id: string }>;
    };
    // AMP manifest fields (spec §6).
    expect(doc).toMatchObject({
      amp: '1.0',
      protocol: 'amp/1.0',
      id: mesh.coordinator.sender.identity,
      endpoints: { message: `${mesh.url}/api/amp/message`, discover: `${mesh.url}/api/amp/discover` },
    });
    expect(doc.amp_capabilities).toEqual(expect.arrayContaining(['echo', 'forecast', 'lookup']));
    // A2A card fields, with capabilities still the A2A object and the AMP extension declared.
    expect(typeof doc.name).toBe('string');
    expect(doc.capabilities.streaming).toBe(true);
    expect(Array.isArray(doc.capabilities)).toBe(false);
    expect(doc.capabilities.extensions.filter((e) => e.uri === AMP_EXTENSION_URI)).toHaveLength(1);
    expect(doc.skills.map((s) => s.id)).toEqual(expect.arrayContaining(['echo', 'lookup']));
  });
});
