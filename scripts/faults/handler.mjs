/**
 * The drill's load handler (`amf worker --handler scripts/faults/handler.mjs`): sleeps
 * AMF_DRILL_SLEEP_MS (default 2000) and answers with the task text, so every task is long enough
 * to be in flight when a fault hits. It honours the task's abort signal, as a real handler should.
 * With AMF_DRILL_RUN_LOG set, every run that reaches its answer appends its task id to that file,
 * so a fault can count how often each task really ran (one line is one small O_APPEND write).
 */
import { appendFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';

const sleepMs = Number(process.env.AMF_DRILL_SLEEP_MS ?? 2000);
const runLog = process.env.AMF_DRILL_RUN_LOG;

export default {
  name: 'drill-sleep',
  description: `Fault drill load: sleeps ${sleepMs} ms, then echoes the task text.`,
  readOnly: true,
  async handle(ctx) {
    await delay(sleepMs, undefined, { signal: ctx.signal });
    if (runLog) appendFileSync(runLog, `${ctx.taskId}\n`);
    return `done: ${ctx.text}`;
  },
};
