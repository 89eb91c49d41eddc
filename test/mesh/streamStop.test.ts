// A coordinator that stops while answers are still coming ends them cleanly (issue 33, part 6): a
// streamed OpenAI answer gets an error chunk and `data: [DONE]`, a waiting non-streamed one a 503 in
// OpenAI's error shape, instead of a connection cut. The worker's handler is held (gatedHandler) so
// both tasks are still running when the coordinator stops as `amf up` stops it (edge, then core).
// Each task is cancelled as its requester is told (TaskDispatcher.endForStop): the record says failed,
// the worker's handler is aborted, so a client that asks again does not have it run twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { startTestMesh, terminalEventsFor, type TestMesh } from '../helpers/meshFixture.js';

/** Frames of an SSE body (`data:` payloads), read as they come. */
class SseReader {
  readonly frames: string[] = [];
  private buffer = '';
  private readonly decoder = new TextDecoder();
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;

  constructor(res: Response) {
    this.reader = res.body!.getReader();
  }

  /** Reads until `count` frames have come; false when the stream ended first. */
  async until(count: number): Promise<boolean> {
    while (this.frames.length < count) {
      const { done, value } = await this.reader.read();
      if (done) return false;
      this.buffer += this.decoder.decode(value, { stream: true });
      let end = this.buffer.indexOf('\n\n');
      while (end >= 0) {
        const frame = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        end = this.buffer.indexOf('\n\n');
        if (frame.startsWith('data: ')) this.frames.push(frame.slice('data: '.length));
      }
    }
    return true;
  }

  /** Reads to the end of the stream: true when it ended cleanly, the error when it was cut. */
  async toEnd(): Promise<true | Error> {
    try {
      while (await this.until(this.frames.length + 1));
      return true;
    } catch (err) {
      return err as Error;
    }
  }
}

describe('a coordinator stopping while answers are under way', () => {
  let mesh: TestMesh;
  const aborted: string[] = [];
  const held: WorkerHandler = {
    name: 'held',
    description: 'answers only when its task is cancelled',
    handle: (ctx) =>
      new Promise((_, reject) =>
        ctx.signal.addEventListener('abort', () => {
          aborted.push(ctx.taskId);
          reject(new Error('cancelled'));
        }),
      ),
  };

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('held', ['held'], held);
  });
  afterAll(async () => {
    await mesh?.close();
  });

  it('ends a streamed answer with an error chunk and [DONE], and a waiting one with a 503', async () => {
    const ask = (stream: boolean) =>
      fetch(`${mesh.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'amf/held', messages: [{ role: 'user', content: 'wait' }], stream }),
      });
    const streamed = await ask(true);
    expect(streamed.status).toBe(200);
    const taskId = streamed.headers.get('x-amf-task-id');
    expect(taskId).toBeTruthy();
    const reader = new SseReader(streamed);
    // The role chunk: the task is announced and the stream is open.
    expect(await reader.until(1)).toBe(true);
    const waiting = ask(false);
    await mesh.waitFor(() => mesh.coordinator.lifecycle.activeCount >= 2, 10_000, 'both tasks running');

    // As `amf up` stops: the HTTP edge, then the core.
    const stopped = (async () => {
      await mesh.http.close();
      await mesh.coordinator.close();
    })();
    const end = await reader.toEnd();
    expect(end, 'the stream ended cleanly, not cut').toBe(true);
    const last = reader.frames.at(-1);
    expect(last).toBe('[DONE]');
    const error = JSON.parse(reader.frames.at(-2)!) as { error?: { message?: string; code?: string } };
    expect(error.error?.message).toMatch(/coordinator is stopping/);
    expect(error.error?.message).toContain(taskId!);

    const answer = await waiting;
    expect(answer.status).toBe(503);
    const body = (await answer.json()) as { error?: { message?: string; type?: string } };
    expect(body.error?.message).toMatch(/coordinator is stopping/);
    const waitingTaskId =
      answer.headers.get('x-amf-task-id') ?? body.error?.message?.match(/task (\S+) was/)?.[1];
    expect(waitingTaskId).toBeTruthy();
    await stopped;

    // Both tasks were cancelled as their requesters were told: failed on record, handlers aborted.
    for (const id of [taskId!, waitingTaskId!]) {
      await mesh.waitFor(() => terminalEventsFor(mesh, id).length > 0, 10_000, `the ending of ${id}`);
      const endings = terminalEventsFor(mesh, id);
      expect(endings).toHaveLength(1);
      expect(endings[0]!.event.type).not.toBe('amf.result.final');
      expect(endings[0]!.event.data.payload).toMatchObject({ reason: 'task_cancelled' });
    }
    await mesh.waitFor(() => aborted.length === 2, 10_000, 'both handlers aborted');
    expect(aborted.sort()).toEqual([taskId!, waitingTaskId!].sort());
  });
});
