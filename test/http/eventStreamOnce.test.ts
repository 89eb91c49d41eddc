// `GET /events` sends each fabric event once: the work-queue copy of a task announcement
// (`amf.work.<tag>`, the same bytes as `amf.task.announce.<tag>`) is task work, not a second event.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AmfEvent } from '../../src/events/cloudEvent.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

/** Reads `data:` frames of an SSE response until `until` holds for one, then stops reading. */
async function readEvents(res: Response, until: (e: AmfEvent) => boolean): Promise<AmfEvent[]> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const events: AmfEvent[] = [];
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return events;
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf('\n\n');
      if (!frame.startsWith('data: ')) continue;
      const event = JSON.parse(frame.slice('data: '.length)) as AmfEvent;
      events.push(event);
      if (until(event)) {
        await reader.cancel();
        return events;
      }
    }
  }
}

describe('GET /events sends every event once', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('echo-once', ['echo'], echoHandler);
  });
  afterAll(() => mesh?.close());

  it('a task announcement appears once, with the work queue on', async () => {
    const controller = new AbortController();
    const res = await mesh.fetch('/events', {
      headers: { accept: 'text/event-stream' },
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const answer = await mesh.fetch('/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: 'once' }] }),
    });
    expect(answer.status).toBe(200);
    const taskId = ((await answer.json()) as { id: string }).id.replace(/^chatcmpl-/, '');
    const events = await readEvents(
      res,
      (e) => e.type === 'amf.result.final' && e.amftaskid === taskId,
    ).finally(() => controller.abort());
    const announces = events.filter((e) => e.type === 'amf.task.announce' && e.amftaskid === taskId);
    expect(announces).toHaveLength(1);
    const ids = events.map((e) => e.id);
    expect(new Set(ids).size, `duplicated: ${ids.filter((id, i) => ids.indexOf(id) !== i).join(', ')}`).toBe(
      ids.length,
    );
  });
});
