/**
 * The coordinator as an A2A agent, driven by the official @a2a-js/sdk client over a real mesh (NATS,
 * coordinator, workers with real handlers): cards, SendMessage over JSON-RPC and HTTP+JSON, streaming,
 * GetTask, ListTasks, CancelTask reaching the worker, SubscribeToTask, routing and error shapes.
 */
import { signEvent } from '../../src/identity/eventSignature.js';
import { amfCardBlock } from '../../src/util/amfCardBlock.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentCard, TaskState, type StreamResponse, type Task } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, type Client } from '@a2a-js/sdk/client';
import { parseLegacyAgentCard } from '@a2a-js/sdk/compat/v0_3/client';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { createEvent } from '../../src/events/cloudEvent.js';
import type { BlockedPayload, ClaimPayload } from '../../src/events/payloads.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { AMP_EXTENSION_URI } from '../../src/protocols/a2a/agentCards.js';
import { AMP_EXTENSION_URI as AMP_URI_OF_AMP } from '../../src/protocols/amp/ampMessage.js';
import { settledTerminalEvents, startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { artifactText, holdingHandler, textMessage } from './a2aTestKit.js';

let mesh: TestMesh;
let client: Client;
let restClient: Client;
const hold = holdingHandler();

beforeAll(async () => {
  mesh = await startTestMesh();
  await mesh.startWorker('echo-1', ['echo'], echoHandler);
  await mesh.startWorker('hold-1', ['hold'], hold.handler);
  client = await new ClientFactory().createFromUrl(mesh.url);
  restClient = await new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: ['HTTP+JSON'] }),
  ).createFromUrl(mesh.url);
}, 60_000);

afterAll(async () => {
  await mesh?.close();
});

/** The A2A 1.0 AgentCard's required fields (a2a.proto REQUIRED), checked on the served JSON. */
function expectValidCard(card: Record<string, unknown>): void {
  for (const key of ['name', 'description', 'version']) expect(typeof card[key], key).toBe('string');
  const interfaces = card.supportedInterfaces as Array<Record<string, unknown>>;
  expect(interfaces.length).toBeGreaterThan(0);
  for (const i of interfaces) {
    expect(() => new URL(String(i.url))).not.toThrow();
    expect(['JSONRPC', 'HTTP+JSON']).toContain(i.protocolBinding);
    expect(['1.0', '0.3']).toContain(i.protocolVersion);
  }
  expect(card.capabilities).toMatchObject({ streaming: true, pushNotifications: false });
  expect(Array.isArray(card.defaultInputModes) && Array.isArray(card.defaultOutputModes)).toBe(true);
  for (const s of card.skills as Array<Record<string, unknown>>) {
    for (const key of ['id', 'name', 'description']) expect(typeof s[key]).toBe('string');
    expect(Array.isArray(s.tags)).toBe(true);
  }
  // The SDK's own parser keeps every interface (the card is a well-formed ProtoJSON AgentCard).
  expect(AgentCard.fromJSON(card).supportedInterfaces).toHaveLength(interfaces.length);
}

describe('agent card', () => {
  it.each([
    ['/.well-known/agent-card.json', 'strict', { 'A2A-Version': '1.0' }],
    ['/.well-known/agent-card.json', 'union', {}],
    ['/.well-known/agent.json', 'legacy', {}],
  ] as const)(
    '%s (%s) is a valid A2A card (the union and agent.json also for 0.3 readers)',
    async (path, view, headers) => {
      const res = await fetch(mesh.url + path, { headers });
      // One path, two bodies: caches must key on the header (agent.json is AMP's route on the coordinator).
      if (path === '/.well-known/agent-card.json') expect(res.headers.get('vary')).toBe('A2A-Version');
      expect(res.status).toBe(200);
      const card = (await res.json()) as Record<string, unknown>;
      expectValidCard(card);
      expect(card.supportedInterfaces).toEqual(
        expect.arrayContaining([
          { url: `${mesh.url}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
          { url: `${mesh.url}/a2a/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
        ]),
      );
      expect((card.supportedInterfaces as unknown[])[0]).toMatchObject({
        protocolBinding: 'JSONRPC',
        protocolVersion: '1.0',
      });
      // Honest capabilities: no A2A push, NATS named as the push path, the AMP extension declared.
      const caps = card.capabilities as { extensions: Array<{ uri: string; required: boolean }> };
      expect(caps.extensions).toContainEqual(
        expect.objectContaining({ uri: AMP_EXTENSION_URI, required: false }),
      );
      expect(AMP_EXTENSION_URI).toBe(AMP_URI_OF_AMP);
      // The mesh facts: an A2A extension's params (strict 1.0 card), also top-level x-amf in agent.json.
      expect(amfCardBlock(card)).toMatchObject({
        role: 'coordinator',
        nats_url: mesh.coordinator.natsUrl,
        push: { a2a_push_notifications: false, canonical: 'nats' },
      });
      if (view === 'strict') {
        // Strict A2A 1.0 (asked for with A2A-Version: 1.0): no 0.3 fields and no x-amf at the top level.
        for (const key of ['url', 'preferredTransport', 'protocolVersion', 'additionalInterfaces', 'x-amf'])
          expect(card).not.toHaveProperty(key);
        return;
      }
      // The union (what an unversioned request, a 0.3 one, gets) has no top-level x-amf; agent.json has.
      if (view === 'union') expect(card).not.toHaveProperty('x-amf');
      else expect(card['x-amf']).toEqual(amfCardBlock(card));
      expect((card.skills as Array<{ id: string }>).map((s) => s.id)).toEqual(
        expect.arrayContaining(['echo', 'hold']),
      );
      // A 0.3 client reads url/preferredTransport: the JSON-RPC endpoint.
      expect(card).toMatchObject({
        url: `${mesh.url}/a2a`,
        preferredTransport: 'JSONRPC',
        protocolVersion: '0.3.0',
      });
      const legacyView = parseLegacyAgentCard({ ...card, supportedInterfaces: undefined });
      expect(legacyView.supportedInterfaces[0]).toMatchObject({
        url: `${mesh.url}/a2a`,
        protocolBinding: 'JSONRPC',
      });
    },
  );
});

describe('SendMessage into the mesh', () => {
  it('dispatches by metadata.tag to a real worker and answers with a completed task (JSON-RPC)', async () => {
    const result = await client.sendMessage(textMessage('hello mesh', { metadata: { tag: 'echo' } }));
    const task = result as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(artifactText(task)).toBe('hello mesh');
    const meta = task.artifacts[0]!.metadata as {
      amfconfidence: number;
      amf: { taskId: string; traceId: string };
    };
    expect(typeof meta.amfconfidence).toBe('number');
    // One id for both: the A2A task is the mesh task.
    expect(meta.amf.taskId).toBe(task.id);
    // contextId is the mesh trace: the announcement carries it as amftraceid.
    expect(meta.amf.traceId).toBe(task.contextId);
    const announce = await mesh.waitForEvent(
      (e) => e.event.type === 'amf.task.announce' && e.event.amftaskid === meta.amf.taskId,
    );
    expect(announce.event.amftraceid).toBe(task.contextId);
    const finals = await settledTerminalEvents(mesh, meta.amf.taskId);
    expect(finals.map((e) => e.event.type)).toEqual(['amf.result.final']);
  });

  it('answers over HTTP+JSON the same way', async () => {
    const task = (await restClient.sendMessage(
      textMessage('over rest', { metadata: { tag: 'echo' } }),
    )) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(artifactText(task)).toBe('over rest');
  });

  it('keeps one trace for one context across messages', async () => {
    const contextId = crypto.randomUUID();
    const a = (await client.sendMessage(
      textMessage('one', { metadata: { tag: 'echo' }, contextId }),
    )) as Task;
    const b = (await client.sendMessage(
      textMessage('two', { metadata: { tag: 'echo' }, contextId }),
    )) as Task;
    expect(a.contextId).toBe(contextId);
    expect(b.contextId).toBe(contextId);
    expect(a.id).not.toBe(b.id);
    const traces = [a, b].map((t) => (t.artifacts[0]!.metadata as { amf: { traceId: string } }).amf.traceId);
    expect(traces).toEqual([contextId, contextId]);
  });

  it('routes by metadata.intent and by a matching skill description', async () => {
    const byIntent = (await client.sendMessage(
      textMessage('intent routed', { metadata: { intent: 'echo the text back' } }),
    )) as Task;
    expect((byIntent.metadata as { amf: { tag: string; routedVia: string } }).amf).toMatchObject({
      tag: 'echo',
      routedVia: 'intent',
    });
    const bySkill = (await client.sendMessage(textMessage('please echo this text'))) as Task;
    expect((bySkill.metadata as { amf: { tag: string; routedVia: string } }).amf).toMatchObject({
      tag: 'echo',
      routedVia: 'skill',
    });
    expect(artifactText(bySkill)).toBe('please echo this text');
  });

  it('routes an AMP request (data part) by its intent; the artifact carries AMP confidence', async () => {
    const amp = {
      amp: '1.0',
      id: 'msg_a2atest0001',
      from: { id: 'tester' },
      to: ['amf-coordinator'],
      intent: 'echo this text back',
      timestamp: new Date().toISOString(),
    };
    const request = textMessage('ignored');
    request.message!.parts = [
      {
        content: { $case: 'data', value: amp },
        metadata: undefined,
        filename: '',
        mediaType: 'application/json',
      },
    ];
    const task = (await client.sendMessage(request)) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect((task.metadata as { amf: { tag: string; routedVia: string } }).amf).toMatchObject({
      tag: 'echo',
      routedVia: 'amp',
    });
    expect(artifactText(task)).toBe('echo this text back');
    const artifact = task.artifacts[0]!;
    expect(artifact.extensions).toContain(AMP_EXTENSION_URI);
    const ampMeta = (
      artifact.metadata as Record<string, { in_reply_to: string; status: string; confidence: number }>
    )[AMP_EXTENSION_URI]!;
    expect(ampMeta.in_reply_to).toBe('msg_a2atest0001');
    expect(['ok', 'partial']).toContain(ampMeta.status);
    expect(ampMeta.confidence).toBe((artifact.metadata as { amfconfidence: number }).amfconfidence);
  });

  it('refuses an invalid AMP request with its AMP error', async () => {
    const request = textMessage('ignored');
    request.message!.parts = [
      {
        content: { $case: 'data', value: { amp: '2.0', id: 'x' } },
        metadata: undefined,
        filename: '',
        mediaType: '',
      },
    ];
    await expect(client.sendMessage(request)).rejects.toThrow(/invalid AMP message/);
  });

  it('refuses a tag nobody serves with an A2A error naming it', async () => {
    await expect(client.sendMessage(textMessage('x', { metadata: { tag: 'nobody-here' } }))).rejects.toThrow(
      /no live agent serves capability "nobody-here"/,
    );
  });
});

describe('SendStreamingMessage', () => {
  it('streams the task, working status, answer chunks and the completed status', async () => {
    const events: StreamResponse[] = [];
    for await (const e of client.sendMessageStream(
      textMessage('streamed three words', { metadata: { tag: 'echo' } }),
    ))
      events.push(e);
    const kinds = events.map((e) => e.payload?.$case);
    expect(kinds[0]).toBe('task');
    const states = events.flatMap((e) =>
      e.payload?.$case === 'statusUpdate' ? [e.payload.value.status?.state] : [],
    );
    expect(states).toContain(TaskState.TASK_STATE_WORKING);
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
    const chunks = events.flatMap((e) =>
      e.payload?.$case === 'artifactUpdate' && !e.payload.value.lastChunk
        ? [
            e.payload.value
              .artifact!.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
              .join(''),
          ]
        : [],
    );
    // The echo worker streams word by word; the last artifact update carries the whole answer.
    expect(chunks.join('')).toBe('streamed three words');
    expect(chunks.length).toBeGreaterThan(1);
    const last = events.filter((e) => e.payload?.$case === 'artifactUpdate').at(-1)!;
    expect(last.payload?.$case === 'artifactUpdate' && last.payload.value.lastChunk).toBe(true);
  });
});

describe('GetTask, ListTasks, CancelTask, SubscribeToTask', () => {
  it('GetTask returns a finished task with its artifact; an unknown id is TaskNotFound', async () => {
    const sent = (await client.sendMessage(textMessage('get me', { metadata: { tag: 'echo' } }))) as Task;
    const got = await client.getTask({ tenant: '', id: sent.id });
    expect(got.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(artifactText(got)).toBe('get me');
    await expect(client.getTask({ tenant: '', id: crypto.randomUUID() })).rejects.toThrow(/not found/i);
  });

  it('ListTasks pages through tasks of a context, newest first', async () => {
    const contextId = crypto.randomUUID();
    const ids: string[] = [];
    for (const text of ['l1', 'l2', 'l3'])
      ids.push(
        ((await client.sendMessage(textMessage(text, { metadata: { tag: 'echo' }, contextId }))) as Task).id,
      );
    const first = await client.listTasks({
      tenant: '',
      contextId,
      status: TaskState.TASK_STATE_UNSPECIFIED,
      pageSize: 2,
      pageToken: '',
      historyLength: undefined,
      statusTimestampAfter: undefined,
      includeArtifacts: false,
    });
    expect(first.totalSize).toBe(3);
    expect(first.tasks).toHaveLength(2);
    expect(first.nextPageToken).not.toBe('');
    const second = await client.listTasks({
      tenant: '',
      contextId,
      status: TaskState.TASK_STATE_UNSPECIFIED,
      pageSize: 2,
      pageToken: first.nextPageToken,
      historyLength: undefined,
      statusTimestampAfter: undefined,
      includeArtifacts: false,
    });
    expect(second.nextPageToken).toBe('');
    expect([...first.tasks, ...second.tasks].map((t) => t.id).sort()).toEqual([...ids].sort());
  });

  it('CancelTask reaches the worker: amf.task.cancel, the handler aborted, one terminal event', async () => {
    const submitted = (await client.sendMessage(
      textMessage('cancel me', { metadata: { tag: 'hold' }, returnImmediately: true }),
    )) as Task;
    const meshTaskId = await hold.started;
    const canceled = await client.cancelTask({ tenant: '', id: submitted.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect(await hold.aborted).toBe(meshTaskId);
    const cancelEvent = await mesh.waitForEvent(
      (e) => e.event.type === 'amf.task.cancel' && e.event.amftaskid === meshTaskId,
    );
    expect(cancelEvent.event.data.payload).toMatchObject({ task_id: meshTaskId, reason: 'task_cancelled' });
    const terminal = await settledTerminalEvents(mesh, meshTaskId);
    expect(terminal.map((e) => e.event.type)).toEqual(['amf.policy.deny']);
    expect(terminal[0]!.event.data.payload).toMatchObject({ reason: 'task_cancelled', terminal: true });
    expect((await client.getTask({ tenant: '', id: submitted.id })).status?.state).toBe(
      TaskState.TASK_STATE_CANCELED,
    );
    // Cancelling again is not an error; cancelling a completed task is.
    const done = (await client.sendMessage(textMessage('finished', { metadata: { tag: 'echo' } }))) as Task;
    await expect(client.cancelTask({ tenant: '', id: done.id, metadata: undefined })).rejects.toThrow(
      /not cancelable/i,
    );
  });
});

describe('SubscribeToTask', () => {
  it('resubscribes to a running task: the task first, then its updates to completion', async () => {
    const gate = holdingHandler('Holds a task for resubscription');
    await mesh.startWorker('gate-1', ['gate'], gate.handler);
    const submitted = (await client.sendMessage(
      textMessage('follow me', { metadata: { tag: 'gate' }, returnImmediately: true }),
    )) as Task;
    await gate.started;
    const stream = client.resubscribeTask({ tenant: '', id: submitted.id });
    const first = await stream.next();
    expect(first.value?.payload?.$case).toBe('task');
    gate.release('released');
    const rest: StreamResponse[] = [];
    for await (const e of stream) rest.push(e);
    const final = rest.filter((e) => e.payload?.$case === 'statusUpdate').at(-1);
    expect(final?.payload?.$case === 'statusUpdate' && final.payload.value.status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    const got = await client.getTask({ tenant: '', id: submitted.id });
    expect(artifactText(got)).toBe('released:follow me');
  });
});

describe('protocol-shaped errors at the HTTP edge', () => {
  it('a body over the limit gets a JSON-RPC error with HTTP 413', async () => {
    const big = 'x'.repeat(mesh.config.openai.maxBodyBytes + 10);
    const res = await fetch(`${mesh.url}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { big } }),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32600 } });
  });

  it('invalid JSON is a JSON-RPC parse error; an unknown method is method-not-found', async () => {
    const bad = await fetch(`${mesh.url}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: '{"jsonrpc":',
    });
    expect(await bad.json()).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32700 } });
    const unknown = await fetch(`${mesh.url}/a2a`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'NoSuchMethod', params: {} }),
    });
    expect(await unknown.json()).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32601 } });
  });

  it('HTTP+JSON errors are google.rpc.Status bodies', async () => {
    const res = await fetch(`${mesh.url}/a2a/rest/tasks/${crypto.randomUUID()}`, {
      headers: { 'a2a-version': '1.0' },
    });
    expect(res.status).toBe(404);
    const body = (await res.json()) as {
      error: { code: number; status: string; details: Array<{ reason: string }> };
    };
    expect(body.error).toMatchObject({ code: 404, status: 'NOT_FOUND' });
    expect(body.error.details[0]?.reason).toBe('TASK_NOT_FOUND');
  });
});

describe('A2A state follows the AMF lifecycle', () => {
  it('claimed/progress → working, blocked → input-required, re-claim → working, final → completed', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let started!: (ids: { taskId: string; traceId: string }) => void;
    const startedP = new Promise<{ taskId: string; traceId: string }>((r) => (started = r));
    const worker = await mesh.startWorker('phases-1', ['phases'], {
      name: 'phases',
      description: 'Reports progress, then waits',
      handle: async (ctx) => {
        ctx.progress('halfway', 50);
        started({ taskId: ctx.taskId, traceId: ctx.traceId });
        await released;
        return 'phases done';
      },
    });
    const seen: Array<{ state: TaskState | undefined; text: string }> = [];
    const record = (value: StreamResponse | void): void => {
      if (value?.payload?.$case !== 'statusUpdate') return;
      const s = value.payload.value.status;
      const part = s?.message?.parts[0]?.content;
      seen.push({ state: s?.state, text: part?.$case === 'text' ? part.value : '' });
    };
    const stream = client.sendMessageStream(textMessage('go', { metadata: { tag: 'phases' } }));
    const first = (await stream.next()).value; // the generator sends the request on the first next()
    const a2aTaskId = first?.payload?.$case === 'task' ? first.payload.value.id : '';
    const { taskId, traceId } = await startedP;
    // Read until the progress message arrived (working, "halfway").
    while (!seen.some((s) => s.text === 'halfway')) record((await stream.next()).value);
    // The worker says it is blocked (on the canonical and the reply subject, as MeshWorker publishes).
    const bus = new EventBus(await mesh.connect('specialist', 'phases-test'));
    const sender = {
      identity: worker.worker.agentId,
      source: worker.url,
      role: 'specialist' as const,
      trustDomain: 'local',
    };
    const publish = (type: 'amf.task.blocked' | 'amf.task.claim', payload: BlockedPayload | ClaimPayload) =>
      bus.publish(
        // Spoken in the worker's name, so signed with its key (the coordinator checks it).
        signEvent(createEvent({ type, sender, payload, taskId, traceId }), worker.worker.key),
        type,
        `amf.internal.reply.${taskId}`,
      );
    publish('amf.task.blocked', { task_id: taskId, agent_id: worker.worker.agentId, reason: 'need a file' });
    // input-required is an interrupted state: the stream ends there (A2A 1.0), the task goes on.
    for (;;) {
      const { value, done } = await stream.next();
      if (done) break;
      record(value);
    }
    expect(seen.at(-1)).toEqual({ state: TaskState.TASK_STATE_INPUT_REQUIRED, text: 'need a file' });
    // A subscriber follows the rest: the worker claims the task again, then answers.
    const follow = client.resubscribeTask({ tenant: '', id: a2aTaskId });
    const snapshot = (await follow.next()).value;
    expect(snapshot?.payload?.$case === 'task' && snapshot.payload.value.status?.state).toBe(
      TaskState.TASK_STATE_INPUT_REQUIRED,
    );
    publish('amf.task.claim', {
      task_id: taskId,
      agent_id: worker.worker.agentId,
      required_capability: 'phases',
    });
    while (seen.at(-1)?.state !== TaskState.TASK_STATE_WORKING) record((await follow.next()).value);
    release();
    for await (const value of follow) record(value);
    expect(seen.map((s) => s.state)).toEqual([
      TaskState.TASK_STATE_SUBMITTED,
      TaskState.TASK_STATE_WORKING,
      TaskState.TASK_STATE_WORKING,
      TaskState.TASK_STATE_INPUT_REQUIRED,
      TaskState.TASK_STATE_WORKING,
      TaskState.TASK_STATE_COMPLETED,
    ]);
    expect(artifactText(await client.getTask({ tenant: '', id: a2aTaskId }))).toBe('phases done');
  });
});
