// A mesh task's claim is held back a moment by its worker (worker/deferredClaims.ts). A handler
// that answers at once sends no claim of its own: its final names the offer, and the coordinator
// records the claim for it, ahead of the final, so the history still reads announce, claim, final.
// A handler that runs longer, or says anything first, sends its own signed claim before that.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { CLAIM_HOLD_MS } from '../../src/worker/deferredClaims.js';
import { eventsFor, settledTerminalEvents, startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';

/** Answers after twice the claim's hold: its worker's own claim leaves first. */
const slowHandler: WorkerHandler = {
  name: 'slow',
  description: 'answers after a pause',
  handle: async (ctx) => {
    await new Promise((resolve) => setTimeout(resolve, 2 * CLAIM_HOLD_MS));
    return { text: `slow: ${ctx.text}` };
  },
};

/** Streams its answer in two chunks at once: the first chunk takes the held claim out before it. */
const chunkingHandler: WorkerHandler = {
  name: 'chunks',
  description: 'streams two chunks',
  handle: async function* (ctx) {
    yield 'one ';
    yield 'two';
    return { text: `one two (${ctx.text})` };
  },
};

const payloadOf = (e: { event: { data: { payload: unknown } } }) =>
  e.event.data.payload as Record<string, unknown>;

/** The task's recorded history (its work-queue offer, a copy of the announcement, left out). */
const historyOf = (mesh: TestMesh, taskId: string) =>
  eventsFor(mesh, taskId).filter((e) => !e.subject.startsWith('amf.work.'));

describe('claims held back by the worker', () => {
  let mesh: TestMesh;
  let echo: RunningWorker;
  let slow: RunningWorker;
  let chunks: RunningWorker;

  beforeAll(async () => {
    mesh = await startTestMesh();
    echo = await mesh.startWorker('echo-held', ['echo'], echoHandler);
    slow = await mesh.startWorker('slow-held', ['slow'], slowHandler);
    chunks = await mesh.startWorker('chunks-held', ['chunks'], chunkingHandler);
  });
  afterAll(() => mesh?.close());

  it('records the claim of a task answered at once for its worker, ahead of the final', async () => {
    const result = await mesh.coordinator.dispatcher.submit({
      tag: 'echo',
      task: 'at once',
      timeoutMs: 10_000,
    });
    expect(result.text).toBe('at once');
    await settledTerminalEvents(mesh, result.taskId);
    // The worker sent no claim of its own, on its subject or anywhere else.
    const ownClaims = mesh.events.filter(
      (e) =>
        e.event.type === 'amf.task.claim' &&
        e.event.amftaskid === result.taskId &&
        e.event.data.auth_context.identity === echo.worker.agentId,
    );
    expect(ownClaims).toEqual([]);
    const history = historyOf(mesh, result.taskId).map((e) => e.event.type);
    expect(history).toEqual(['amf.task.announce', 'amf.task.claim', 'amf.result.final']);
    const claim = eventsFor(mesh, result.taskId, 'amf.task.claim')[0]!;
    expect(claim.event.amfagentrole).toBe('coordinator');
    expect(payloadOf(claim)).toMatchObject({ agent_id: echo.worker.agentId, required_capability: 'echo' });
    const task = mesh.coordinator.lifecycle.get(result.taskId);
    expect(task).toMatchObject({ state: 'completed', claimedBy: echo.worker.agentId });
  });

  it('lets a handler that runs longer send its own signed claim, and records no other', async () => {
    const result = await mesh.coordinator.dispatcher.submit({
      tag: 'slow',
      task: 'later',
      timeoutMs: 10_000,
    });
    expect(result.text).toBe('slow: later');
    await settledTerminalEvents(mesh, result.taskId);
    const claims = eventsFor(mesh, result.taskId, 'amf.task.claim');
    expect(claims).toHaveLength(1);
    expect(claims[0]!.event.data.auth_context.identity).toBe(slow.worker.agentId);
    expect(typeof (claims[0]!.event as unknown as Record<string, unknown>).amfsignature).toBe('string');
    expect(historyOf(mesh, result.taskId).map((e) => e.event.type)).toEqual([
      'amf.task.announce',
      'amf.task.claim',
      'amf.result.final',
    ]);
  });

  it('sends the held claim before the first chunk of a stream', async () => {
    const seen: string[] = [];
    const result = await mesh.coordinator.dispatcher.submit({
      tag: 'chunks',
      task: 'stream it',
      stream: true,
      timeoutMs: 10_000,
      onUpdate: (u) => seen.push(u.kind),
    });
    expect(result.text).toBe('one two (stream it)');
    await settledTerminalEvents(mesh, result.taskId);
    const history = historyOf(mesh, result.taskId);
    expect(history.map((e) => e.event.type)).toEqual([
      'amf.task.announce',
      'amf.task.claim',
      'amf.result.partial',
      'amf.result.partial',
      'amf.result.final',
    ]);
    expect(history[1]!.event.data.auth_context.identity).toBe(chunks.worker.agentId);
    // The requester heard the claim before the chunks, and no transition was refused on the way.
    expect(seen.slice(0, 3)).toEqual(['claimed', 'partial', 'partial']);
    expect(
      mesh.events.filter(
        (e) => e.event.type === 'amf.policy.warning' && payloadOf(e).reason === 'invalid_transition',
      ),
    ).toEqual([]);
  });
});
