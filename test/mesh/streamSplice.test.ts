/**
 * A stream is one execution. A streaming chat completion runs on worker process A, which is
 * SIGKILLed after its third chunk; worker B is there to take a retry. The client must get A's chunks,
 * then an error event and `[DONE]`, never B's chunks spliced after A's (an answer no execution
 * produced); the task has one terminal event, a deny saying the stream was interrupted. A task whose
 * worker dies before its first chunk is still retried transparently (lifecycle tests).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { settledTerminalEvents, startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const AMF_BIN = fileURLToPath(new URL('../../bin/amf.js', import.meta.url));
const STREAM_HANDLER = fileURLToPath(new URL('../fixtures/slowStreamHandler.mjs', import.meta.url));
const TAG = 'spliced';

/** B's handler: the same ten chunks, named as B's. */
const streamB: WorkerHandler = {
  name: 'stream-b',
  description: 'streams ten numbered chunks',
  async *handle(ctx) {
    for (let i = 0; i < 10; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      if (ctx.signal.aborted) return;
      yield `chunk ${i} from b; `;
    }
  },
};

describe('a streaming task whose worker dies mid-stream', () => {
  let mesh: TestMesh;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { tasks: { ttlSeconds: 30 } } });
  });
  afterAll(async () => {
    child?.kill('SIGKILL');
    await mesh?.close();
  });

  it('ends the stream with an error instead of splicing the retry', async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      STREAM_CHUNK_MS: '300',
      STREAM_WORKER_NAME: 'a',
      AMF_LOG_LEVEL: 'warn',
    };
    for (const key of Object.keys(env)) if (key.startsWith('AMF_') && key.endsWith('_PASS')) delete env[key];
    child = spawn(
      process.execPath,
      [
        AMF_BIN,
        'worker',
        '--name',
        'streamer-a',
        '--tags',
        TAG,
        '--handler',
        STREAM_HANDLER,
        '--nats-url',
        mesh.coordinator.natsUrl,
        '--port',
        '0',
        '--data-dir',
        mesh.config.dataDir,
        '--no-mdns',
      ],
      { env, stdio: ['ignore', 'ignore', 'ignore'] },
    );
    await mesh.waitFor(
      () => mesh.coordinator.registry.isLive('spiffe://local/worker/streamer-a'),
      30_000,
      'worker A admitted',
    );

    const res = await fetch(new URL('/v1/chat/completions', mesh.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: `amf/${TAG}`,
        stream: true,
        messages: [{ role: 'user', content: 'go' }],
      }),
    });
    expect(res.status).toBe(200);
    const taskId = res.headers.get('x-amf-task-id') ?? '';
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let killed = false;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      const chunksSoFar = (text.match(/chunk \d+ from a/g) ?? []).length;
      if (!killed && chunksSoFar >= 3) {
        killed = true;
        child.kill('SIGKILL');
        // Somewhere for a retry to go: the splice needs a second execution.
        await mesh.startWorker('streamer-b', [TAG], streamB);
      }
    }
    expect(killed).toBe(true);
    const events = text
      .split('\n\n')
      .filter((frame) => frame.startsWith('data: '))
      .map((frame) => frame.slice('data: '.length));
    expect(events.at(-1)).toBe('[DONE]');
    const bodies = events.slice(0, -1).map((e) => JSON.parse(e) as Record<string, unknown>);
    const content = bodies
      .map((b) => (b.choices as { delta?: { content?: string } }[] | undefined)?.[0]?.delta?.content ?? '')
      .join('');
    expect(content).not.toContain('from b');
    expect(content).toMatch(/^(chunk \d from a; )+$/);
    const error = bodies.at(-1)?.error as { code?: string; message?: string } | undefined;
    expect(error?.code).toBe('task_failed');
    expect(error?.message).toContain('stream');
    const endings = await settledTerminalEvents(mesh, taskId);
    expect(endings).toHaveLength(1);
    expect((endings[0]!.event.data.payload as { reason?: string }).reason).toBe('stream_interrupted');
  }, 90_000);
});
