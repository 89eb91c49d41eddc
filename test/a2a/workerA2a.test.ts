/**
 * A worker as an A2A agent, called directly by the official @a2a-js/sdk client: its card, SendMessage
 * and streaming answered by its own handler, the same claim/partial/final events on NATS as a mesh
 * task (with the A2A task id), CancelTask aborting the handler, and `POST /tasks/send` doing the same.
 */
import { amfCardBlock } from '../../src/util/amfCardBlock.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskState, type StreamResponse, type Task } from '@a2a-js/sdk';
import { ClientFactory, type Client } from '@a2a-js/sdk/client';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { eventsFor, startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { artifactText, holdingHandler, textMessage } from './a2aTestKit.js';

let mesh: TestMesh;
let echo: RunningWorker;
let held: RunningWorker;
let echoClient: Client;
let holdClient: Client;
const hold = holdingHandler();

beforeAll(async () => {
  mesh = await startTestMesh();
  echo = await mesh.startWorker('echo-direct', ['echo', 'say'], echoHandler);
  held = await mesh.startWorker('hold-direct', ['hold'], hold.handler);
  echoClient = await new ClientFactory().createFromUrl(echo.url);
  holdClient = await new ClientFactory().createFromUrl(held.url);
}, 60_000);

afterAll(async () => {
  await mesh?.close();
});

describe('worker agent card', () => {
  it.each(['/.well-known/agent-card.json', '/.well-known/agent.json'])(
    '%s names the worker A2A endpoints',
    async (path) => {
      const card = (await (await fetch(echo.url + path)).json()) as Record<string, unknown>;
      expect(card.supportedInterfaces).toEqual(
        expect.arrayContaining([
          { url: `${echo.url}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
          { url: `${echo.url}/a2a/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
        ]),
      );
      expect(card.capabilities).toMatchObject({ streaming: true, pushNotifications: false });
      expect((card.skills as Array<{ id: string }>).map((s) => s.id)).toEqual(['echo', 'say']);
      expect(amfCardBlock(card)).toMatchObject({
        agent_id: echo.worker.agentId,
        role: 'worker',
        capability_tags: ['echo', 'say'],
        // The built-in echo handler declares itself read-only (AMP read-only callers may reach it).
        read_only: true,
      });
      // Only coordinators publish the NATS URL (LOCKED #2).
      expect(amfCardBlock(card)).not.toHaveProperty('nats_url');
    },
  );
});

describe('SendMessage to a worker', () => {
  it('runs the worker handler and publishes claim and final on NATS with the A2A task id', async () => {
    const task = (await echoClient.sendMessage(
      textMessage('direct hello', { metadata: { tag: 'say' } }),
    )) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(artifactText(task)).toBe('direct hello');
    expect(task.metadata).toMatchObject({ amf: { tag: 'say', agentId: echo.worker.agentId } });
    const final = await mesh.waitForEvent(
      // The recorded final (shared subject): the coordinator records in arrival order, so the claim
      // is recorded before it.
      (e) =>
        e.event.type === 'amf.result.final' &&
        e.event.amftaskid === task.id &&
        !e.subject.startsWith('amf.internal.'),
      10_000,
      'recorded final of the direct task',
    );
    expect(final.event.data.payload).toMatchObject({
      task_id: task.id,
      status: 'completed',
      result: { text: 'direct hello' },
    });
    expect(final.event.amftraceid).toBe(task.contextId);
    // The claim's signature check may finish after the final's, so its record may come later.
    await mesh.waitFor(() => eventsFor(mesh, task.id, 'amf.task.claim').length > 0, 10_000, 'claim');
    const claims = eventsFor(mesh, task.id, 'amf.task.claim');
    expect(claims).toHaveLength(1);
    expect(claims[0]!.event.data.payload).toMatchObject({
      agent_id: echo.worker.agentId,
      required_capability: 'say',
    });
  });

  it('streams partial chunks to the client and on NATS', async () => {
    const events: StreamResponse[] = [];
    for await (const e of echoClient.sendMessageStream(textMessage('one two three'))) events.push(e);
    const first = events[0]!.payload;
    expect(first?.$case).toBe('task');
    const taskId = first?.$case === 'task' ? first.value.id : '';
    const states = events.flatMap((e) =>
      e.payload?.$case === 'statusUpdate' ? [e.payload.value.status?.state] : [],
    );
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
    const chunks = events.filter((e) => e.payload?.$case === 'artifactUpdate' && !e.payload.value.lastChunk);
    expect(chunks.length).toBe(3);
    const recorded = () =>
      eventsFor(mesh, taskId, 'amf.result.partial')
        .map((e) => (e.event.data.payload as { delta: string }).delta)
        .join('');
    await mesh.waitFor(() => recorded().length >= 'one two three'.length, 10_000, 'recorded partials');
    expect(recorded()).toBe('one two three');
  });

  it('shows the handler progress as working status messages', async () => {
    const w = await mesh.startWorker('progress-direct', ['steps'], {
      name: 'steps',
      description: 'Reports a step, then answers',
      handle: async (ctx) => {
        ctx.progress('step one', 50);
        return 'stepped';
      },
    });
    const client = await new ClientFactory().createFromUrl(w.url);
    const statuses: Array<[TaskState | undefined, string]> = [];
    for await (const e of client.sendMessageStream(textMessage('go'))) {
      if (e.payload?.$case !== 'statusUpdate') continue;
      const part = e.payload.value.status?.message?.parts[0]?.content;
      statuses.push([e.payload.value.status?.state, part?.$case === 'text' ? part.value : '']);
    }
    expect(statuses).toEqual([
      [TaskState.TASK_STATE_WORKING, ''],
      [TaskState.TASK_STATE_WORKING, 'step one'],
      [TaskState.TASK_STATE_COMPLETED, ''],
    ]);
  });

  it('refuses a tag the worker does not serve', async () => {
    await expect(echoClient.sendMessage(textMessage('x', { metadata: { tag: 'calc' } }))).rejects.toThrow(
      /this worker serves echo, say/,
    );
  });

  it('CancelTask aborts the handler; the direct task ends with one failed final (cancelled)', async () => {
    const submitted = (await holdClient.sendMessage(
      textMessage('stop me', { returnImmediately: true }),
    )) as Task;
    expect(await hold.started).toBe(submitted.id);
    const canceled = await holdClient.cancelTask({ tenant: '', id: submitted.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect(await hold.aborted).toBe(submitted.id);
    const final = await mesh.waitForEvent(
      (e) => e.event.type === 'amf.result.final' && e.event.amftaskid === submitted.id,
    );
    expect(final.event.data.payload).toMatchObject({ status: 'failed', error: { code: 'cancelled' } });
    await mesh.waitFor(() => eventsFor(mesh, submitted.id, 'amf.result.final').length > 0, 10_000, 'record');
    expect(eventsFor(mesh, submitted.id, 'amf.result.final')).toHaveLength(1);
    expect((await holdClient.getTask({ tenant: '', id: submitted.id })).status?.state).toBe(
      TaskState.TASK_STATE_CANCELED,
    );
  });
});

describe('POST /tasks/send', () => {
  const asOperator = () => ({
    'content-type': 'application/json',
    authorization: `Bearer ${mesh.http.operatorKey}`,
  });

  it('keeps its response shape and publishes the same events as a mesh task, under its own id', async () => {
    const res = await fetch(`${echo.url}/tasks/send`, {
      method: 'POST',
      headers: asOperator(),
      body: JSON.stringify({ text: 'sent directly', tag: 'echo' }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { task_id: string };
    expect(body).toEqual({
      task_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      status: 'completed',
      agent_id: echo.worker.agentId,
      result: { text: 'sent directly' },
    });
    const id = body.task_id;
    // The coordinator records a direct task's claim and final, unchanged, as they pass its checks;
    // the claim's signature check may finish after the final's.
    const recorded = () => eventsFor(mesh, id).map((e) => e.event.type);
    await mesh.waitFor(() => recorded().length >= 2, 10_000, `claim and final of ${id}`);
    expect(recorded().sort()).toEqual(['amf.result.final', 'amf.task.claim']);
  });

  it('says why a caller-chosen id is refused: the worker names a direct task itself', async () => {
    const res = await fetch(`${echo.url}/tasks/send`, {
      method: 'POST',
      headers: asOperator(),
      body: JSON.stringify({ id: crypto.randomUUID(), text: 'x' }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { code: 'INVALID_REQUEST', message: expect.stringMatching(/"id" is not accepted/) },
    });
  });
});
