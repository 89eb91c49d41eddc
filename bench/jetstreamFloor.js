/**
 * The durable floor of bench/taskPath.js: the least a Node developer could write by hand to put "a
 * durable task to a worker, wait for its answer" behind an HTTP edge on the same fabric as AMF
 * (NATS JetStream). No identity, no policy, no history beyond the result, no retries, no
 * validation: what AMF's own work is measured against.
 *
 *   node bench/jetstreamFloor.js edge   NATS_URL HTTP_PORT    `POST /v1/chat/completions` stores the
 *                                                           task in stream FLOOR_TASKS (work queue,
 *                                                           acknowledged) and answers once its result
 *                                                           comes by on `floor.result.<id>`
 *   node bench/jetstreamFloor.js worker NATS_URL CONCURRENCY  pulls tasks (durable consumer
 *                                                           `workers`), stores each echo in stream
 *                                                           FLOOR_RESULTS (acknowledged), then
 *                                                           acknowledges the task
 *
 * The parent creates both streams and the consumer first (`createFloorStreams`). Each role prints
 * `{"ready":true}` once it serves; exits on SIGTERM or when its parent goes away.
 */
import http from 'node:http';
import process from 'node:process';
import { randomUUID } from 'node:crypto';
import { TextDecoder, TextEncoder } from 'node:util';
import { AckPolicy, RetentionPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

const TASKS_STREAM = 'FLOOR_TASKS';
const RESULTS_STREAM = 'FLOOR_RESULTS';
const TASK_SUBJECT = 'floor.task';
const RESULT_PREFIX = 'floor.result.';
const CONSUMER = 'workers';
const MAX_BODY_BYTES = 64 * 1024;

/**
 * Creates the floor's streams and the workers' consumer on `nc`'s server. `concurrency` bounds the
 * tasks a worker holds unacknowledged, as `amf worker` bounds its own.
 * @param {import('@nats-io/transport-node').NatsConnection} nc
 * @param {number} concurrency
 */
export async function createFloorStreams(nc, concurrency) {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({
    name: TASKS_STREAM,
    subjects: [TASK_SUBJECT],
    retention: RetentionPolicy.Workqueue,
  });
  await jsm.streams.add({ name: RESULTS_STREAM, subjects: [`${RESULT_PREFIX}>`] });
  await jsm.consumers.add(TASKS_STREAM, {
    durable_name: CONSUMER,
    ack_policy: AckPolicy.Explicit,
    max_ack_pending: concurrency,
  });
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * @param {string} url
 * @param {number} port
 */
async function serveEdge(url, port) {
  const nc = await connect({ servers: url, name: 'bench-floor-edge' });
  const js = jetstream(nc);
  const prefix = randomUUID().slice(0, 8);
  let next = 0;
  /** @type {Map<string, (text: string) => void>} */
  const waiting = new Map();
  nc.subscribe(`${RESULT_PREFIX}>`, {
    callback: (err, msg) => {
      if (err) return;
      const id = msg.subject.slice(RESULT_PREFIX.length);
      const answer = waiting.get(id);
      if (!answer) return;
      waiting.delete(id);
      answer(msg.json().text);
    },
  });
  const reply = (res, status, body) => {
    const bytes = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(bytes) });
    res.end(bytes);
  };
  const server = http.createServer((req, res) => {
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('end', () => {
      let text;
      try {
        text = JSON.parse(Buffer.concat(chunks).toString('utf8')).messages.at(-1).content;
      } catch {
        return reply(res, 400, { error: { message: 'expected a chat completion request' } });
      }
      const id = `${prefix}-${++next}`;
      waiting.set(id, (answer) =>
        reply(res, 200, {
          id,
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: answer }, finish_reason: 'stop' }],
        }),
      );
      js.publish(TASK_SUBJECT, encoder.encode(JSON.stringify({ id, text }))).catch((err) => {
        waiting.delete(id);
        reply(res, 503, { error: { message: String(err) } });
      });
    });
  });
  await new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(undefined)));
  return () => Promise.allSettled([new Promise((r) => server.close(r)), nc.close()]);
}

/**
 * @param {string} url
 * @param {number} concurrency
 */
async function serveWorker(url, concurrency) {
  const nc = await connect({ servers: url, name: 'bench-floor-worker' });
  const js = jetstream(nc);
  const consumer = await js.consumers.get(TASKS_STREAM, CONSUMER);
  const messages = await consumer.consume({ max_messages: concurrency });
  void (async () => {
    for await (const m of messages) {
      const task = JSON.parse(decoder.decode(m.data));
      js.publish(`${RESULT_PREFIX}${task.id}`, encoder.encode(JSON.stringify({ text: task.text }))).then(
        () => m.ack(),
        () => m.nak(),
      );
    }
  })();
  return () => nc.close();
}

const [role, url, arg] = process.argv.slice(2);
if (process.argv[1] === new URL(import.meta.url).pathname) {
  const number = Number(arg);
  if (
    !['edge', 'worker'].includes(role) ||
    !url?.startsWith('nats://') ||
    !Number.isInteger(number) ||
    number < 1
  ) {
    process.stderr.write(
      'usage: node bench/jetstreamFloor.js edge NATS_URL HTTP_PORT | worker NATS_URL CONCURRENCY\n',
    );
    process.exit(2);
  }
  const stop = role === 'edge' ? await serveEdge(url, number) : await serveWorker(url, number);
  let closing;
  const close = () => {
    closing ??= stop().finally(() => process.exit(0));
  };
  process.once('SIGTERM', close);
  process.once('SIGINT', close);
  process.on('disconnect', close);
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
}
