/**
 * The BullMQ side of bench/taskPath.js, one process per role as a Node service would deploy it:
 *
 *   node bench/bullmqAgent.js worker   PORT CONCURRENCY   a BullMQ Worker whose processor echoes the
 *                                                         job's text (the `amf worker --handler echo`
 *                                                         of this side)
 *   node bench/bullmqAgent.js producer PORT               a Queue + QueueEvents: each task is
 *                                                         `queue.add()` then `job.waitUntilFinished()`,
 *                                                         the "send a durable task and wait for the
 *                                                         answer" of a Node developer
 *
 * Both print one JSON line `{"ready":true}` on stdout once connected. The producer drives the load
 * itself (so no extra hop sits between the load loop and BullMQ's client): on IPC
 * `{cmd: 'run', id, concurrency, seconds}` it answers `{type: 'result', id, result}` with
 * bench/lib/load.js's result (the parent sends a warm-up run first, then reads CPU times around the
 * measured one). Jobs are kept after completion (BullMQ's default), so the bench can
 * weigh what Redis keeps per task. Either process exits on SIGTERM or when its parent goes away.
 */
import process from 'node:process';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { runLoad } from './lib/load.js';

/**
 * Posts a message to the parent process over the IPC channel `fork` opened.
 * @param {unknown} message
 */
const send = (message) => {
  if (!process.send) throw new Error('no IPC channel: this script runs as a forked child');
  process.send(message);
};

const QUEUE = 'amf-bench-echo';
const TEXT = 'Hello from the AMF task-path benchmark: please echo this sentence back, word for word.';

const [role, portArg, concurrencyArg] = process.argv.slice(2);
const port = Number(portArg);
if (!['worker', 'producer'].includes(role) || !Number.isInteger(port) || port < 1 || port > 65535) {
  process.stderr.write('usage: node bench/bullmqAgent.js worker|producer PORT [CONCURRENCY]\n');
  process.exit(2);
}
// BullMQ 6 takes its Redis client as an optional peer: under ESM it wants a constructed client, one per
// Queue, Worker and QueueEvents (the last two block on their connection).
const connection = () => new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: null });

const closers = [];
let closing;
const close = () => {
  closing ??= Promise.allSettled(closers.map((c) => c())).then(() => process.exit(0));
};
process.once('SIGTERM', close);
process.once('SIGINT', close);
process.on('disconnect', close);

if (role === 'worker') {
  const concurrency = Number(concurrencyArg ?? 16);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1024) {
    process.stderr.write(`bullmqAgent: concurrency ${concurrencyArg} is not an integer in 1..1024\n`);
    process.exit(2);
  }
  const worker = new Worker(QUEUE, async (job) => ({ text: job.data.text }), {
    connection: connection(),
    concurrency,
  });
  worker.on('error', (err) => process.stderr.write(`bullmqAgent worker: ${err.message}\n`));
  closers.push(() => worker.close());
  await worker.waitUntilReady();
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
} else {
  const queue = new Queue(QUEUE, { connection: connection() });
  const events = new QueueEvents(QUEUE, { connection: connection() });
  closers.push(
    () => events.close(),
    () => queue.close(),
  );
  // Each waiting task adds a listener to the queue and the event stream until its answer: at c=64 more
  // than Node's default of 10, which is the load, not a leak.
  queue.setMaxListeners(0);
  events.setMaxListeners(0);
  await queue.waitUntilReady();
  await events.waitUntilReady();

  /** One durable task, answered: `done()` when the echo came back intact, `done(err)` otherwise. */
  const issue = (done) => {
    queue
      .add('echo', { text: TEXT })
      .then((job) => job.waitUntilFinished(events))
      .then(
        (answer) =>
          answer?.text === TEXT ? done() : done(new Error(`unexpected answer ${JSON.stringify(answer)}`)),
        (err) => done(err),
      );
  };
  // One task end to end before reporting ready: the worker is consuming and events flow.
  await /** @type {Promise<void>} */ (
    new Promise((resolve, reject) => issue((err) => (err ? reject(err) : resolve())))
  );
  process.on('message', async (/** @type {any} */ msg) => {
    if (msg?.cmd !== 'run') return;
    const { id, concurrency, seconds } = msg;
    const result = await runLoad({ concurrency, durationMs: seconds * 1000, issue });
    send({
      type: 'result',
      id,
      result: { ...result, firstError: result.firstError ? String(result.firstError.message) : undefined },
    });
  });
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
}
