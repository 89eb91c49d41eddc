/**
 * Every outcome of a blocking A2A 1.0 SendMessage on the light path (lightSendMessage.ts) against
 * the SDK's own path: two coordinator A2A servers over one real mesh, one with the light path and
 * one without, get the same requests over real HTTP and must answer alike (ids and times aside),
 * and store alike (GetTask after the fact). A task that ends before anything of it was shown is
 * answered directly (one Task or Message, saved once); a task shown while it runs (a progress
 * message, input-required) goes through the SDK's result manager, and stays reachable by CancelTask
 * and SubscribeToTask from other clients while the blocking request waits, on both paths.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskState, type StreamResponse, type Task } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, type Client } from '@a2a-js/sdk/client';
import { TaskRejectedError, type WorkerHandler } from '../../src/worker/handlerApi.js';
import type { AgentExecutor, RequestContext } from '@a2a-js/sdk/server';
import {
  A2aServer,
  BoundedTaskStore,
  createCoordinatorA2a,
  type CoordinatorA2a,
} from '../../src/protocols/a2a/index.js';
import { coordinatorPorts } from '../../src/apps/coordinatorApp.js';
import { coordinatorAgentCard } from '../../src/protocols/a2a/agentCards.js';
import { cardRoute } from '../../src/protocols/a2a/cardRoute.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { textMessage } from './a2aTestKit.js';

let mesh: TestMesh;
const servers: http.Server[] = [];
/** Handlers that wait, released by the test: keyed by the message text after `hold `. */
const holds = new Map<string, () => void>();

function held(key: string): Promise<void> {
  return new Promise<void>((resolve) => holds.set(key, resolve));
}

/** What the handler does is chosen by the message text. */
const outcomes: WorkerHandler = {
  name: 'outcomes',
  description: 'Outcomes of a blocking SendMessage',
  handle: async (ctx) => {
    const [word, key = ''] = ctx.text.split(' ');
    switch (word) {
      case 'data':
        return { text: 'with data', data: { count: 7 } };
      case 'artifacts':
        return {
          text: 'and artifacts',
          artifacts: [
            { name: 'notes', parts: [{ text: 'a note' }] },
            { name: 'numbers', parts: [{ data: { n: 1 } }] },
          ],
        };
      case 'empty':
        return '';
      case 'message':
        return { text: 'as a message', respondWith: 'message' as const };
      case 'reject':
        throw new TaskRejectedError('not for me');
      case 'fail':
        throw new Error('it broke');
      case 'progress':
        ctx.progress('halfway');
        return 'after progress';
      case 'ask': {
        const answer = await ctx.requestInput('which one?');
        return `chose ${answer.text}`;
      }
      case 'hold':
        ctx.progress('holding');
        await held(key);
        return `released ${key}`;
      default:
        return `echo ${ctx.text}`;
    }
  },
};

/** One coordinator A2A server on an HTTP server of its own. */
async function serve(lightSendMessage: boolean): Promise<CoordinatorA2a & { url: string }> {
  let url = '';
  const ports = coordinatorPorts(mesh.coordinator).a2a;
  const a2a = createCoordinatorA2a(ports, () => url, undefined, { lightSendMessage });
  const card = cardRoute(() => coordinatorAgentCard(ports.card, url));
  const server = http.createServer((req, res) => {
    const where = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (where.pathname === '/.well-known/agent-card.json') card(req, res);
    else void a2a.server.handle(req, res, where);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { ...a2a, url };
}

let light: CoordinatorA2a & { url: string };
let sdk: CoordinatorA2a & { url: string };

beforeAll(async () => {
  mesh = await startTestMesh();
  await mesh.startWorker('outcomes-1', ['outcomes'], outcomes);
  light = await serve(true);
  sdk = await serve(false);
}, 60_000);

afterAll(async () => {
  for (const release of holds.values()) release();
  for (const s of servers) s.close();
  await mesh?.close();
});

interface Answer {
  status: number;
  contentType: string | null;
  body: Record<string, unknown>;
}

async function post(base: string, body: unknown): Promise<Answer> {
  const res = await fetch(`${base}/a2a`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    body: (await res.json()) as Record<string, unknown>,
  };
}

let nextId = 1;

function sendMessage(
  text: string,
  params: Record<string, unknown> = {},
  message: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id: nextId++,
    method: 'SendMessage',
    params: {
      message: {
        messageId: randomUUID(),
        role: 'ROLE_USER',
        parts: [{ text }],
        metadata: { tag: 'outcomes' },
        ...message,
      },
      ...params,
    },
  };
}

function getTask(id: string, historyLength?: number): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id: nextId++,
    method: 'GetTask',
    params: { id, ...(historyLength === undefined ? {} : { historyLength }) },
  };
}

const UUIDS = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/**
 * A value with what differs between two runs of the same request made constant: ids (UUIDs, also
 * within text, numbered in order of appearance), times, and the JSON-RPC id.
 */
function normalised(value: unknown): unknown {
  const ids = new Map<string, string>();
  const id = (uuid: string): string => {
    if (!ids.has(uuid)) ids.set(uuid, `<id${ids.size}>`);
    return ids.get(uuid)!;
  };
  const replace = (v: unknown, key = ''): unknown => {
    if (Array.isArray(v)) return v.map((x) => replace(x));
    if (typeof v === 'object' && v !== null)
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, replace(x, k)]));
    if (key === 'timestamp') return '<time>';
    if (key === 'id' && typeof v === 'number') return '<rpc id>';
    return typeof v === 'string' ? v.replace(UUIDS, id) : v;
  };
  return replace(value);
}

/** The same request to both servers: both answers, normalised, and the light path's counters. */
async function both(request: Record<string, unknown>) {
  const served = light.server.light!.served;
  const direct = light.server.light!.answeredDirectly;
  const a = await post(light.url, request);
  const b = await post(sdk.url, request);
  return {
    a,
    b,
    viaLight: light.server.light!.served - served,
    answeredDirectly: light.server.light!.answeredDirectly - direct,
  };
}

function taskOf(answer: Answer): { id: string; status: { state: string } } {
  return (answer.body.result as { task: { id: string; status: { state: string } } }).task;
}

/** GetTask on each server of its own task: the same stored task, normalised. */
async function expectSameStored(a: Answer, b: Answer): Promise<void> {
  const gotA = await post(light.url, getTask(taskOf(a).id));
  const gotB = await post(sdk.url, getTask(taskOf(b).id));
  expect(gotA.body.error).toBeUndefined();
  expect(normalised(gotA.body.result)).toEqual(normalised(gotB.body.result));
}

describe('a blocking SendMessage on the light path answers as the SDK path does', () => {
  it.each([
    ['a result with data', 'data', 'TASK_STATE_COMPLETED'],
    ['handler artifacts before the result', 'artifacts', 'TASK_STATE_COMPLETED'],
    ['an empty answer (no result artifact)', 'empty', 'TASK_STATE_COMPLETED'],
    ['a rejection', 'reject', 'TASK_STATE_REJECTED'],
    ['a handler failure', 'fail', 'TASK_STATE_FAILED'],
  ])('%s: answered directly, stored once, the same task', async (_name, text, state) => {
    const { a, b, viaLight, answeredDirectly } = await both(sendMessage(text));
    expect([viaLight, answeredDirectly]).toEqual([1, 1]);
    expect(a.status).toBe(200);
    expect([a.status, a.contentType]).toEqual([b.status, b.contentType]);
    expect(taskOf(a).status.state).toBe(state);
    expect(normalised(a.body)).toEqual(normalised(b.body));
    await expectSameStored(a, b);
  });

  it('a Message answer: answered directly, no task stored', async () => {
    const { a, b, answeredDirectly } = await both(sendMessage('message'));
    expect(answeredDirectly).toBe(1);
    const message = (a.body.result as { message: { parts: unknown[]; taskId?: string } }).message;
    expect(JSON.stringify(message.parts)).toContain('as a message');
    expect(normalised(a.body)).toEqual(normalised(b.body));
  });

  it('a task shown while it runs (a progress message) goes through the result manager', async () => {
    const { a, b, viaLight, answeredDirectly } = await both(sendMessage('progress'));
    expect([viaLight, answeredDirectly]).toEqual([1, 0]);
    expect(taskOf(a).status.state).toBe('TASK_STATE_COMPLETED');
    expect(JSON.stringify(a.body)).toContain('halfway');
    expect(normalised(a.body)).toEqual(normalised(b.body));
    await expectSameStored(a, b);
  });

  it.each([0, 1])('historyLength %i cuts the answer, not the stored task', async (historyLength) => {
    for (const text of ['data', 'progress']) {
      const { a, b } = await both(sendMessage(text, { configuration: { historyLength } }));
      expect(normalised(a.body)).toEqual(normalised(b.body));
      const history = (a.body.result as { task: { history?: unknown[] } }).task.history ?? [];
      expect(history.length).toBe(historyLength);
      // The store keeps the whole history: the answer shows its last messages.
      const stored = await post(light.url, getTask(taskOf(a).id));
      const all = (stored.body.result as { history: unknown[] }).history;
      expect(all.length).toBeGreaterThanOrEqual(1);
      expect(history).toEqual(historyLength === 0 ? [] : all.slice(-historyLength));
      await expectSameStored(a, b);
    }
  });

  it('the conversation named by contextId is kept, and a new one is made without it', async () => {
    const contextId = randomUUID();
    const { a, b } = await both(sendMessage('data', {}, { contextId }));
    expect((a.body.result as { task: { contextId: string } }).task.contextId).toBe(contextId);
    expect(normalised(a.body)).toEqual(normalised(b.body));
  });

  it('input-required: the answer asks, the follow-up (SDK path) completes, GetTask shows it all', async () => {
    const { a, b, answeredDirectly } = await both(sendMessage('ask'));
    expect(answeredDirectly).toBe(0);
    expect(taskOf(a).status.state).toBe('TASK_STATE_INPUT_REQUIRED');
    expect(normalised(a.body)).toEqual(normalised(b.body));
    const follow = (base: string, taskId: string) =>
      post(base, sendMessage('left', {}, { taskId, metadata: undefined }));
    const doneA = await follow(light.url, taskOf(a).id);
    const doneB = await follow(sdk.url, taskOf(b).id);
    expect(taskOf(doneA).status.state).toBe('TASK_STATE_COMPLETED');
    expect(JSON.stringify(doneA.body)).toContain('chose left');
    expect(normalised(doneA.body)).toEqual(normalised(doneB.body));
    await expectSameStored(a, b);
  });

  it('refusals: the same JSON-RPC errors (media type, unknown tag, empty parts)', async () => {
    const requests = [
      sendMessage('x', {}, { parts: [{ text: 'x', mediaType: 'image/png' }] }),
      sendMessage('x', {}, { metadata: { tag: 'no-such-tag' } }),
      sendMessage('x', {}, { parts: [] }),
      sendMessage('x', { configuration: { historyLength: -1 } }),
    ];
    for (const request of requests) {
      const { a, b, viaLight } = await both(request);
      expect(viaLight).toBe(1);
      expect(a.body.error).toBeDefined();
      expect([a.status, a.contentType, normalised(a.body)]).toEqual([
        b.status,
        b.contentType,
        normalised(b.body),
      ]);
    }
  });

  it('hands what it leaves out (a tenant, referenced tasks, an odd id) to the SDK transport', async () => {
    const requests = [
      sendMessage('data', { tenant: 'acme' }),
      sendMessage('data', {}, { referenceTaskIds: [randomUUID()] }),
      { ...sendMessage('data'), id: 1.5 },
    ];
    for (const request of requests) {
      const { a, b, viaLight, answeredDirectly } = await both(request);
      expect([viaLight, answeredDirectly]).toEqual([1, 0]);
      expect([a.status, normalised(a.body)]).toEqual([b.status, normalised(b.body)]);
    }
  });
});

async function clientFor(url: string): Promise<Client> {
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ['JSONRPC'] }),
  ).createFromUrl(url);
}

/** The id of the one task of `contextId` once it is stored (shown). */
async function shownTask(client: Client, contextId: string): Promise<string> {
  let id: string | undefined;
  await mesh.waitFor(
    async () => {
      const list = await client.listTasks({
        tenant: '',
        contextId,
        status: TaskState.TASK_STATE_UNSPECIFIED,
        pageSize: 10,
        pageToken: '',
        historyLength: undefined,
        statusTimestampAfter: undefined,
        includeArtifacts: false,
      });
      id = list.tasks[0]?.id;
      return id !== undefined;
    },
    10_000,
    `the task of context ${contextId} to be shown`,
  );
  return id!;
}

describe.each([
  ['light path', () => light.url, 1],
  ['SDK path', () => sdk.url, 0],
])('a shown task of a blocking SendMessage, with the official SDK client (%s)', (_name, url, viaLight) => {
  it('is cancelled by another client while the request waits: both see it canceled', async () => {
    const served = light.server.light!.served;
    const client = await clientFor(url());
    const contextId = randomUUID();
    const key = randomUUID();
    const waiting = client.sendMessage(
      textMessage(`hold ${key}`, { metadata: { tag: 'outcomes' }, contextId }),
    );
    const taskId = await shownTask(client, contextId);
    const canceled = await client.cancelTask({ tenant: '', id: taskId, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const answer = (await waiting) as Task;
    expect(answer.id).toBe(taskId);
    expect(answer.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    holds.get(key)?.();
    const stored = await client.getTask({ tenant: '', id: taskId, historyLength: 0 });
    expect(stored.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect(light.server.light!.served - served).toBe(viaLight);
  });

  it('is followed by SubscribeToTask to its end, while the request waits for the same end', async () => {
    const client = await clientFor(url());
    const contextId = randomUUID();
    const key = randomUUID();
    const waiting = client.sendMessage(
      textMessage(`hold ${key}`, { metadata: { tag: 'outcomes' }, contextId }),
    );
    const taskId = await shownTask(client, contextId);
    const stream = client.resubscribeTask({ tenant: '', id: taskId });
    // The subscription is in place once it has had the task.
    const first = await stream.next();
    expect(first.value?.payload?.$case).toBe('task');
    holds.get(key)!();
    const rest: StreamResponse[] = [];
    for await (const e of stream) rest.push(e);
    const answer = (await waiting) as Task;
    expect(answer.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const final = rest.filter((e) => e.payload?.$case === 'statusUpdate').at(-1);
    expect(final?.payload?.$case === 'statusUpdate' && final.payload.value.status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    const stored = await client.getTask({ tenant: '', id: taskId, historyLength: 0 });
    expect(stored.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });
});

/** An executor that throws, or returns having published nothing, as no AMF executor does. */
class OddExecutor implements AgentExecutor {
  execute = async (rc: RequestContext): Promise<void> => {
    const text = rc.userMessage.parts[0]?.content;
    if (text?.$case === 'text' && text.value === 'throw') throw new Error('the executor broke');
  };
  cancelTask = async (): Promise<void> => undefined;
}

describe('an executor that throws or publishes nothing', () => {
  async function oddServer(lightSendMessage: boolean): Promise<{ url: string; server: A2aServer }> {
    const server = new A2aServer({
      card: () => amfCard(),
      executor: new OddExecutor(),
      store: new BoundedTaskStore(10),
      maxBodyBytes: 65_536,
      awaitsInput: () => false,
      lightSendMessage,
    });
    const httpServer = http.createServer((req, res) => {
      void server.handle(req, res, new URL(req.url ?? '/', 'http://127.0.0.1'));
    });
    servers.push(httpServer);
    await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`, server };
  }

  it('ends alike on both paths: a failed task, or the error of a run without a result', async () => {
    const { url: lightUrl, server } = await oddServer(true);
    const { url: sdkUrl } = await oddServer(false);
    for (const text of ['throw', 'nothing']) {
      const request = sendMessage(text);
      const a = await post(lightUrl, request);
      const b = await post(sdkUrl, request);
      expect([a.status, a.contentType, normalised(a.body)]).toEqual([
        b.status,
        b.contentType,
        normalised(b.body),
      ]);
      if (text === 'throw') expect(taskOf(a).status.state).toBe('TASK_STATE_FAILED');
      else expect(a.body.error).toBeDefined();
    }
    expect(server.light!.served).toBe(2);
  });
});

/** A card with the interfaces and input modes every AMF agent's card has. */
function amfCard(): Record<string, unknown> {
  return coordinatorAgentCard(coordinatorPorts(mesh.coordinator).a2a.card, 'http://127.0.0.1:1');
}
