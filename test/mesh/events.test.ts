// `GET /events`: the fabric as Server-Sent Events, read with fetch and a stream reader.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AmfEvent } from '../../src/events/cloudEvent.js';
import { validateEvent } from '../../src/events/validateEvent.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

/** One open SSE connection: every frame it received, parsed, plus waiting on what comes. */
interface SseStream {
  /** Raw text of every non-comment frame, as received (without the blank line that ends it). */
  frames: string[];
  /** The JSON of each `data:` frame. */
  events: AmfEvent[];
  /** Comment lines (`: connected`, `: keepalive`). */
  comments: string[];
  waitFor(predicate: (e: AmfEvent) => boolean, timeoutMs?: number, what?: string): Promise<AmfEvent>;
  close(): Promise<void>;
}

const openStreams: SseStream[] = [];

/** Opens `url` as an event stream; throws with the status and body when it is not a 200 stream. */
async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const controller = new AbortController();
  const res = await fetch(url, {
    headers: { accept: 'text/event-stream', ...headers },
    signal: controller.signal,
  });
  if (res.status !== 200 || !res.body)
    throw new Error(`GET ${url} answered ${res.status}: ${await res.text()}`);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const frames: string[] = [];
  const events: AmfEvent[] = [];
  const comments: string[] = [];
  const waiters = new Set<{ predicate: (e: AmfEvent) => boolean; resolve: (e: AmfEvent) => void }>();
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const pump = (async () => {
    let buffer = '';
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch {
        return; // aborted by close()
      }
      if (chunk.done) return;
      buffer += decoder.decode(chunk.value, { stream: true });
      let end = buffer.indexOf('\n\n');
      while (end >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf('\n\n');
        if (frame.startsWith(':')) {
          comments.push(frame);
          continue;
        }
        frames.push(frame);
        const data = frame
          .split('\n')
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(5).trimStart())
          .join('\n');
        const event = JSON.parse(data) as AmfEvent;
        events.push(event);
        for (const w of waiters) {
          if (w.predicate(event)) {
            waiters.delete(w);
            w.resolve(event);
          }
        }
      }
    }
  })();
  const stream: SseStream = {
    frames,
    events,
    comments,
    waitFor(predicate, timeoutMs = 10_000, what = 'event') {
      const seen = events.find(predicate);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const waiter = {
          predicate,
          resolve: (e: AmfEvent) => {
            clearTimeout(timer);
            resolve(e);
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`timed out after ${timeoutMs} ms waiting on the SSE stream for ${what}`));
        }, timeoutMs);
        waiters.add(waiter);
      });
    },
    async close() {
      controller.abort();
      await pump;
    },
  };
  openStreams.push(stream);
  return stream;
}

afterEach(async () => {
  await Promise.all(openStreams.splice(0).map((s) => s.close()));
});

const isHeartbeat = (e: AmfEvent) => e.type === 'amf.discovery.agent.heartbeat';
const aboutTask = (taskId: string) => (e: AmfEvent) =>
  e.amftaskid === taskId || (e.data.payload as { task_id?: string }).task_id === taskId;

/** Runs one echo completion and returns its task id. */
async function complete(url: string, text: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: text }] }),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { id: string; choices: Array<{ message: { content: string } }> };
  expect(body.choices[0]?.message.content).toBe(text);
  return body.id.replace(/^chatcmpl-/, '');
}

describe('GET /events', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('echo-1', ['echo'], echoHandler);
  });
  afterAll(() => mesh?.close());

  it('streams public events as `data: <CloudEvent JSON>` frames, internal replies excluded', async () => {
    const stream = await openSse(`${mesh.url}/events`, mesh.operatorHeaders());
    await stream.waitFor(isHeartbeat, 10_000, 'a heartbeat');
    const taskId = await complete(mesh.url, 'seen on the stream');
    const final = await stream.waitFor(
      (e) => e.type === 'amf.result.final' && aboutTask(taskId)(e),
      10_000,
      'the final result',
    );
    await stream.waitFor(
      (e) => e.type === 'amf.task.announce' && aboutTask(taskId)(e),
      1000,
      'the announcement',
    );
    await stream.waitFor((e) => e.type === 'amf.task.claim' && aboutTask(taskId)(e), 1000, 'the claim');
    expect(stream.comments[0]).toBe(': connected');
    for (const frame of stream.frames) {
      // One line per frame: `data: ` and the event JSON (no embedded newlines).
      expect(frame.split('\n')).toHaveLength(1);
      expect(frame.startsWith('data: ')).toBe(true);
      const checked = validateEvent(JSON.parse(frame.slice('data: '.length)));
      expect(checked.ok, JSON.stringify(checked)).toBe(true);
    }
    expect(final.specversion).toBe('1.0');
    expect((final.data.payload as { result?: { text?: string } }).result?.text).toBe('seen on the stream');
    // The worker publishes the final result on amf.result.final and on amf.internal.reply.<id>;
    // only the public copy may reach the stream.
    expect(stream.events.filter((e) => e.id === final.id)).toHaveLength(1);
  });

  it('?subject=amf.task.> delivers task events and no heartbeats', async () => {
    const filtered = await openSse(
      `${mesh.url}/events?subject=${encodeURIComponent('amf.task.>')}`,
      mesh.operatorHeaders(),
    );
    const everything = await openSse(`${mesh.url}/events`, mesh.operatorHeaders());
    // Both streams share one fabric subscription, which hands each event to every client in order:
    // a heartbeat the unfiltered stream got before the task started was offered to the filtered one.
    await everything.waitFor(isHeartbeat, 10_000, 'a heartbeat');
    const taskId = await complete(mesh.url, 'filtered');
    await filtered.waitFor(
      (e) => e.type === 'amf.task.claim' && aboutTask(taskId)(e),
      10_000,
      'the claim (filtered)',
    );
    await everything.waitFor(
      (e) => e.type === 'amf.result.final' && aboutTask(taskId)(e),
      10_000,
      'the final result',
    );
    expect(filtered.events.some((e) => e.type === 'amf.task.announce' && aboutTask(taskId)(e))).toBe(true);
    expect(filtered.events.length).toBeGreaterThan(0);
    expect(filtered.events.filter(isHeartbeat)).toEqual([]);
    expect(filtered.events.every((e) => e.type.startsWith('amf.task.'))).toBe(true);
    expect(everything.events.some(isHeartbeat)).toBe(true);
    expect(everything.events.some((e) => e.type === 'amf.result.final')).toBe(true);
  });

  it('refuses internal subjects and invalid patterns with 400', async () => {
    const cases: Array<[string, RegExp]> = [
      ['amf.internal.raw', /internal/],
      ['amf.internal.>', /internal/],
      ['amf.internal.reply.*', /internal/],
      ['amf..task', /invalid subject filter/],
      ['amf.>.task', /invalid subject filter/],
      ['amf.task.>x', /invalid subject filter/],
      ['', /invalid subject filter/],
      ['other.>', /within amf\.>/],
    ];
    for (const [pattern, message] of cases) {
      const res = await mesh.fetch(`/events?subject=${encodeURIComponent(pattern)}`);
      expect(res.status, pattern).toBe(400);
      expect(res.headers.get('content-type'), pattern).toMatch(/^application\/json/);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code, pattern).toBe('INVALID_REQUEST');
      expect(body.error.message, pattern).toMatch(message);
    }
  });
});

describe('GET /events with an API key', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { coordinator: { apiKey: 'sse-key' } } });
    await mesh.startWorker('echo-k', ['echo'], echoHandler);
  });
  afterAll(() => mesh?.close());

  it('answers 401 without the key or with a wrong ?api_key=', async () => {
    const none = await fetch(`${mesh.url}/events`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe('UNAUTHORIZED');
    expect((await fetch(`${mesh.url}/events?api_key=wrong`)).status).toBe(401);
  });

  it('streams with ?api_key=<key> (EventSource cannot send headers) and with a Bearer header', async () => {
    const viaQuery = await openSse(
      `${mesh.url}/events?api_key=sse-key&subject=${encodeURIComponent('amf.discovery.>')}`,
    );
    const heartbeat = await viaQuery.waitFor(isHeartbeat, 10_000, 'a heartbeat via ?api_key=');
    expect((heartbeat.data.payload as { agent_id?: string }).agent_id).toBe('spiffe://local/worker/echo-k');
    const viaHeader = await openSse(`${mesh.url}/events`, { authorization: 'Bearer sse-key' });
    await viaHeader.waitFor(isHeartbeat, 10_000, 'a heartbeat via the Bearer header');
  });
});
