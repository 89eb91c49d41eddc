/**
 * The drill's load handler (`amf worker --handler scripts/faults/handler.mjs`): sleeps
 * AMF_DRILL_SLEEP_MS (default 2000) and answers with the task text, so every task is long enough
 * to be in flight when a fault hits. It honours the task's abort signal, as a real handler should.
 * With AMF_DRILL_RUN_LOG set, every run that reaches its answer appends its task id to that file,
 * so a fault can count how often each task really ran (one line is one small O_APPEND write); with
 * AMF_DRILL_START_LOG, every call of the handler is logged there too, finished or not.
 *
 * Two variants for the faults that need them: with AMF_DRILL_STREAM=1 the answer is streamed in ten
 * chunks over the sleep, each tagged `⟦<worker>⟧` (the load strips the tags and sees whose chunks it
 * got: two workers' chunks in one answer are a splice); with AMF_DRILL_STUCK_FILE, a task started
 * while that file exists never ends and ignores its abort signal (a handler stuck for good).
 *
 * With AMF_DRILL_CARD_UNREACHABLE=1 the worker's own HTTP edge closes every connection as it arrives
 * (this module is loaded into the worker's process): its card cannot be fetched, so it is never
 * admitted, while it still heartbeats and pulls work on NATS, as a worker behind a firewall would.
 */
import { appendFileSync, existsSync } from 'node:fs';
import { Server } from 'node:http';
import { setInterval } from 'node:timers';
import { setTimeout as delay } from 'node:timers/promises';

const sleepMs = Number(process.env.AMF_DRILL_SLEEP_MS ?? 2000);
const runLog = process.env.AMF_DRILL_RUN_LOG;
const startLog = process.env.AMF_DRILL_START_LOG;
const stream = process.env.AMF_DRILL_STREAM === '1';
const stuckFile = process.env.AMF_DRILL_STUCK_FILE;
const worker = process.env.AMF_DRILL_WORKER ?? 'w';
const CHUNKS = 10;

if (process.env.AMF_DRILL_CARD_UNREACHABLE === '1') {
  const emit = Server.prototype.emit;
  Server.prototype.emit = function (event, ...args) {
    if (event === 'connection') {
      args[0].destroy();
      return true;
    }
    return emit.call(this, event, ...args);
  };
}

/** A promise that never settles, whatever the signal says. */
const forever = () => new Promise(() => setInterval(() => undefined, 60_000));

async function* streamed(ctx) {
  const answer = `done: ${ctx.text}`;
  const size = Math.ceil(answer.length / CHUNKS);
  for (let i = 0; i < CHUNKS; i++) {
    await delay(sleepMs / CHUNKS, undefined, { signal: ctx.signal });
    yield `⟦${worker}⟧${answer.slice(i * size, (i + 1) * size)}`;
  }
  if (runLog) appendFileSync(runLog, `${ctx.taskId}\n`);
  return '';
}

export default {
  name: 'drill-sleep',
  description: `Fault drill load: sleeps ${sleepMs} ms, then echoes the task text.`,
  readOnly: true,
  handle(ctx) {
    if (startLog) appendFileSync(startLog, `${ctx.taskId}\n`);
    if (stuckFile && existsSync(stuckFile)) return forever();
    if (stream) return streamed(ctx);
    return (async () => {
      await delay(sleepMs, undefined, { signal: ctx.signal });
      if (runLog) appendFileSync(runLog, `${ctx.taskId}\n`);
      return `done: ${ctx.text}`;
    })();
  },
};
