/**
 * The real-client matrix (issue 30): the official Python `a2a-sdk` 1.x and `@a2a-js/sdk` 1.x, over
 * JSON-RPC and HTTP+JSON, against the coordinator and a worker, through whole task lifecycles as a
 * plain client drives them (no AMF metadata: the coordinator routes by its default agent):
 * multi-turn (input-required, then follow-ups to the same running handler), a streaming follow-up
 * (each answer stream begins with the Task, A2A 1.0 section 3.1.2), and cancel (a second cancel is
 * TaskNotCancelableError).
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageRequest, TaskState, type StreamResponse, type Task } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, type Client } from '@a2a-js/sdk/client';
import { TaskNotCancelableError } from '@a2a-js/sdk/errors';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const SCRIPT = fileURLToPath(new URL('./python_a2a_scenarios.py', import.meta.url));

/** Asks twice, then answers with both replies; "wait" holds the task until it is cancelled. */
const turns: WorkerHandler = {
  name: 'turns',
  description: 'Multi-turn conversations for the real-client matrix',
  handle: async (ctx) => {
    if (ctx.text === 'wait')
      return new Promise<string>((_resolve, reject) =>
        ctx.signal.addEventListener('abort', () => reject(new Error('cancelled'))),
      );
    const first = await ctx.requestInput('what colour?');
    const second = await ctx.requestInput(`and a shape for ${first.text}?`);
    return `${first.text}|${second.text}`;
  },
};

let mesh: TestMesh;
let workerUrl: string;

beforeAll(async () => {
  // Two agents: plain messages reach `turns` because it is the configured default agent.
  mesh = await startTestMesh({ config: { a2a: { defaultAgent: 'turns' } } });
  workerUrl = (await mesh.startWorker('turns-1', ['turns'], turns)).url;
  await mesh.startWorker('echo-1', ['echo'], echoHandler);
}, 60_000);

afterAll(async () => {
  await mesh?.close();
});

const targets = [
  ['coordinator', () => mesh.url],
  ['worker', () => workerUrl],
] as const;
const bindings = ['JSONRPC', 'HTTP+JSON'] as const;

function plain(text: string, taskId?: string, contextId?: string): SendMessageRequest {
  return SendMessageRequest.fromJSON({
    message: {
      messageId: randomUUID(),
      role: 'ROLE_USER',
      parts: [{ text }],
      ...(taskId ? { taskId } : {}),
      ...(contextId ? { contextId } : {}),
    },
  });
}

function textOfTask(task: Task): string {
  return task.artifacts
    .flatMap((a) => a.parts)
    .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
    .join('');
}

function promptOf(task: Task): string | undefined {
  const content = task.status?.message?.parts[0]?.content;
  return content?.$case === 'text' ? content.value : undefined;
}

async function jsClient(url: string, binding: (typeof bindings)[number]): Promise<Client> {
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] }),
  ).createFromUrl(url);
}

/** Drains a stream: the payload kinds in order, and the task's state and text at the end. */
async function drain(stream: AsyncGenerator<StreamResponse>): Promise<{
  kinds: string[];
  state: TaskState | undefined;
  text: string;
  prompt: string | undefined;
  taskId: string;
}> {
  const kinds: string[] = [];
  let state: TaskState | undefined;
  let text = '';
  let prompt: string | undefined;
  let taskId = '';
  for await (const event of stream) {
    const payload = event.payload;
    if (!payload) continue;
    kinds.push(payload.$case);
    if (payload.$case === 'task') {
      taskId = payload.value.id;
      state = payload.value.status?.state;
      prompt = promptOf(payload.value);
      text = textOfTask(payload.value) || text;
    } else if (payload.$case === 'statusUpdate') {
      state = payload.value.status?.state;
      const content = payload.value.status?.message?.parts[0]?.content;
      prompt = content?.$case === 'text' ? content.value : prompt;
    } else if (payload.$case === 'artifactUpdate') {
      const chunk = payload.value.artifact?.parts
        .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
        .join('');
      text = payload.value.append ? text + (chunk ?? '') : (chunk ?? '');
    }
  }
  return { kinds, state, text, prompt, taskId };
}

describe.each(targets)('@a2a-js/sdk 1.x against the %s', (_name, url) => {
  it.each(bindings)('multi-turn: input-required, then follow-ups reach the same handler (%s)', async (b) => {
    const client = await jsClient(url(), b);
    const first = (await client.sendMessage(plain('ask'))) as Task;
    expect(first.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(promptOf(first)).toBe('what colour?');
    const second = (await client.sendMessage(plain('blue', first.id, first.contextId))) as Task;
    expect(second.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(promptOf(second)).toBe('and a shape for blue?');
    const done = (await client.sendMessage(plain('round', first.id, first.contextId))) as Task;
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOfTask(done)).toBe('blue|round');
  });

  it.each(bindings)('a streaming follow-up begins with the Task (%s)', async (b) => {
    const client = await jsClient(url(), b);
    const first = await drain(client.sendMessageStream(plain('ask')));
    expect(first.kinds[0]).toBe('task');
    expect(first.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const second = await drain(client.sendMessageStream(plain('blue', first.taskId)));
    // The SDK's client refuses a stream whose first event is not a Task or Message (-32004).
    expect(second.kinds[0]).toBe('task');
    expect(second.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(second.prompt).toBe('and a shape for blue?');
    const done = await drain(client.sendMessageStream(plain('round', first.taskId)));
    expect(done.kinds[0]).toBe('task');
    expect(done.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(done.text).toBe('blue|round');
  });

  it.each(bindings)('cancel, and a second cancel is TaskNotCancelableError (%s)', async (b) => {
    const client = await jsClient(url(), b);
    const started = (await client.sendMessage(
      SendMessageRequest.fromJSON({
        message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'wait' }] },
        configuration: { returnImmediately: true },
      }),
    )) as Task;
    const canceled = await client.cancelTask({ tenant: '', id: started.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const again = await client.cancelTask({ tenant: '', id: started.id, metadata: undefined }).then(
      () => undefined,
      (err: unknown) => err,
    );
    // The SDK's client maps the wire error back to its class, on either binding.
    expect(again).toBeInstanceOf(TaskNotCancelableError);
  });
});

interface PyStep {
  error?: string;
  kinds?: string[];
  state?: string;
  text?: string;
  prompt?: string;
  history?: string[];
}

function runPython(baseUrl: string, cases: Array<{ scenario: string; binding: string }>) {
  const env = { ...process.env, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost' };
  return new Promise<Array<{ transport: string; steps: PyStep[] }>>((resolve, reject) => {
    execFile(
      process.env.AMF_TEST_PYTHON ?? 'python3',
      [SCRIPT, baseUrl, JSON.stringify(cases)],
      { env, timeout: 120_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`python failed: ${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout) as Array<{ transport: string; steps: PyStep[] }>);
      },
    );
  });
}

describe.each(targets)('Python a2a-sdk 1.x against the %s', { timeout: 120_000 }, (_name, url) => {
  it('multi-turn, streaming follow-ups and cancel over both bindings', async () => {
    const cases = bindings.flatMap((binding) =>
      ['multi-turn', 'stream-follow-up', 'cancel'].map((scenario) => ({ scenario, binding })),
    );
    const results = await runPython(url(), cases);
    expect(results).toHaveLength(cases.length);
    results.forEach((r, i) => {
      const { scenario, binding } = cases[i]!;
      const label = `${scenario} ${binding}`;
      expect(r.transport, label).toBe(binding === 'JSONRPC' ? 'JsonRpcTransport' : 'RestTransport');
      // The cancel scenario's last step is the refused second cancel.
      const ok = scenario === 'cancel' ? r.steps.slice(0, 2) : r.steps;
      for (const step of ok) expect(step.error, label).toBeUndefined();
      if (scenario === 'cancel') {
        expect(r.steps[1]!.state, label).toBe('TASK_STATE_CANCELED');
        expect(r.steps[2]!.error, label).toMatch(/TaskNotCancelable/);
        return;
      }
      const [first, second, done, got] = r.steps;
      expect(first!.state, label).toBe('TASK_STATE_INPUT_REQUIRED');
      expect(first!.prompt, label).toBe('what colour?');
      expect(second!.state, label).toBe('TASK_STATE_INPUT_REQUIRED');
      expect(second!.prompt, label).toBe('and a shape for blue?');
      expect(done!.state, label).toBe('TASK_STATE_COMPLETED');
      expect(done!.text, label).toBe('blue|round');
      if (scenario === 'stream-follow-up')
        for (const step of [first, second, done]) expect(step!.kinds![0], label).toBe('task');
      expect(got!.history, label).toEqual(['ask', 'blue', 'round']);
    });
  });
});
