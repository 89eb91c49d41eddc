/**
 * Multi-turn A2A with the official @a2a-js/sdk client over a real mesh: a handler asks for input
 * (input-required, `amf.task.blocked`) and the follow-up message carrying the task id reaches the SAME
 * running handler, through the coordinator (`amf.task.input` to the worker holding the task) and on
 * a worker directly; handlers answer with artifacts of every kind, with a Message, or reject the
 * task; non-blocking SendMessage returns the task at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, TaskState, type Message, type Task } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, type Client } from '@a2a-js/sdk/client';
import { TaskRejectedError, type WorkerHandler } from '../../src/worker/handlerApi.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { textMessage } from './a2aTestKit.js';

let mesh: TestMesh;
let workerUrl: string;
const runs: string[] = [];
let release!: () => void;
const released = new Promise<void>((r) => (release = r));

/** What the handler does is chosen by the message text. */
const turns: WorkerHandler = {
  name: 'turns',
  description: 'Multi-turn test handler',
  handle: async (ctx) => {
    runs.push(ctx.taskId);
    switch (ctx.text) {
      case 'ask': {
        const first = await ctx.requestInput('what colour?');
        const second = await ctx.requestInput(`and a shape for ${first.text}?`);
        return `${ctx.messageId}|${first.text}|${first.messageId}|${second.text}`;
      }
      case 'artifacts':
        return {
          text: '',
          artifacts: [
            { name: 'notes', parts: [{ text: 'some text' }] },
            { name: 'file', parts: [{ file: { name: 'a.txt', mediaType: 'text/plain', bytes: 'dGNr' } }] },
            { name: 'link', parts: [{ file: { name: 'b.txt', uri: 'https://example.invalid/b.txt' } }] },
            { name: 'numbers', parts: [{ data: { count: 42 } }] },
          ],
        };
      case 'message':
        return { text: 'just a message', respondWith: 'message' as const };
      case 'reject':
        throw new TaskRejectedError('not for me');
      case 'wait':
        await released;
        return 'waited';
      default:
        return `echo ${ctx.text}`;
    }
  },
};

function followUp(taskId: string, text: string, messageId: string): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: { messageId, taskId, role: 'ROLE_USER', parts: [{ text }] },
  });
}

function finalText(task: Task): string {
  return task.artifacts
    .flatMap((a) => a.parts)
    .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
    .join('');
}

async function clientFor(url: string, transport: 'JSONRPC' | 'HTTP+JSON'): Promise<Client> {
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [transport] }),
  ).createFromUrl(url);
}

beforeAll(async () => {
  mesh = await startTestMesh();
  workerUrl = (await mesh.startWorker('turns-1', ['turns'], turns)).url;
}, 60_000);

afterAll(async () => {
  release();
  await mesh?.close();
});

const tag = { metadata: { tag: 'turns' } };

describe.each([
  ['coordinator (through the mesh)', () => mesh.url],
  ['worker (direct)', () => workerUrl],
])('multi-turn on the %s', (_name, url) => {
  it.each(['JSONRPC', 'HTTP+JSON'] as const)(
    'input-required, then follow-ups reach the same running handler (%s)',
    async (transport) => {
      const client = await clientFor(url(), transport);
      const start = SendMessageRequest.fromJSON({
        message: { messageId: `m-start-${transport}`, role: 'ROLE_USER', parts: [{ text: 'ask' }], ...tag },
      });
      const first = (await client.sendMessage(start)) as Task;
      expect(first.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      const prompt = first.status?.message?.parts[0]?.content;
      expect(prompt).toEqual({ $case: 'text', value: 'what colour?' });
      // On NATS the worker said it is blocked, with the prompt as the reason (the A2A task id is the
      // mesh task id: the SDK makes UUIDs).
      const blocked = await mesh.waitForEvent(
        (e) => e.event.type === 'amf.task.blocked' && e.event.amftaskid === first.id,
      );
      expect((blocked.event.data.payload as { reason: string }).reason).toBe('what colour?');
      const runsBefore = runs.length;
      const second = (await client.sendMessage(followUp(first.id, 'blue', `m-blue-${transport}`))) as Task;
      expect(second.id).toBe(first.id);
      expect(second.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      expect(second.status?.message?.parts[0]?.content).toEqual({
        $case: 'text',
        value: 'and a shape for blue?',
      });
      const done = (await client.sendMessage(followUp(first.id, 'round', `m-round-${transport}`))) as Task;
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      // One handler run saw the first message id and both follow-ups.
      expect(finalText(done)).toBe(`m-start-${transport}|blue|m-blue-${transport}|round`);
      expect(runs.length).toBe(runsBefore);
      // The history holds the three user messages in order.
      const got = await client.getTask({ tenant: '', id: first.id, historyLength: 10 });
      const userIds = got.history.filter((m) => m.role === 1).map((m) => m.messageId);
      expect(userIds).toEqual([`m-start-${transport}`, `m-blue-${transport}`, `m-round-${transport}`]);
      if (url() === mesh.url) {
        // Through the mesh the coordinator handed each follow-up to the worker holding the task.
        const meshTaskId = first.id;
        const inputs = mesh.events.filter(
          (e) => e.event.type === 'amf.task.input' && e.event.amftaskid === meshTaskId,
        );
        expect(inputs.map((e) => (e.event.data.payload as { text: string }).text)).toEqual(['blue', 'round']);
      }
    },
  );

  it('returns text, file (bytes and URL) and data artifacts', async () => {
    const client = await clientFor(url(), 'JSONRPC');
    const task = (await client.sendMessage(textMessage('artifacts', tag))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const kinds = task.artifacts.map((a) => a.parts[0]?.content?.$case);
    expect(kinds).toEqual(['text', 'raw', 'url', 'data']);
    const file = task.artifacts[1]!.parts[0]!;
    expect(file.filename).toBe('a.txt');
    expect(file.mediaType).toBe('text/plain');
    expect(Buffer.from(file.content?.$case === 'raw' ? file.content.value : []).toString()).toBe('tck');
    expect(task.artifacts[3]!.parts[0]!.content).toEqual({ $case: 'data', value: { count: 42 } });
  });

  it('answers with a Message instead of a Task when the handler asks', async () => {
    const client = await clientFor(url(), 'HTTP+JSON');
    const answer = (await client.sendMessage(textMessage('message', tag))) as Message;
    expect(answer.messageId).toBeTruthy();
    expect('status' in answer).toBe(false);
    expect(answer.parts[0]?.content).toEqual({ $case: 'text', value: 'just a message' });
  });

  it('ends a task the handler rejects as rejected', async () => {
    const client = await clientFor(url(), 'JSONRPC');
    const task = (await client.sendMessage(textMessage('reject', tag))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    expect(task.status?.message?.parts[0]?.content).toEqual({ $case: 'text', value: 'not for me' });
  });

  it('refuses a follow-up to a task that is working, not input-required', async () => {
    const client = await clientFor(url(), 'JSONRPC');
    const task = (await client.sendMessage(textMessage('wait', { ...tag, returnImmediately: true }))) as Task;
    await expect(client.sendMessage(followUp(task.id, 'more', `m-more-${task.id}`))).rejects.toThrow(
      /input-required/,
    );
  });
});

describe('non-blocking SendMessage', () => {
  it('returns the task at once; GetTask shows its end later', async () => {
    const client = await clientFor(mesh.url, 'JSONRPC');
    const task = (await client.sendMessage(textMessage('wait', { ...tag, returnImmediately: true }))) as Task;
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(task.status?.state);
    release();
    await mesh.waitFor(
      async () =>
        (await client.getTask({ tenant: '', id: task.id, historyLength: 0 })).status?.state ===
        TaskState.TASK_STATE_COMPLETED,
      10_000,
      'the non-blocking task to complete',
    );
    const done = await client.getTask({ tenant: '', id: task.id, historyLength: 0 });
    expect(finalText(done)).toBe('waited');
  });
});
