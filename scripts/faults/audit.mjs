/**
 * The event audit: reads the AMF_EVENTS stream back, as the coordinator role, and decides per
 * request whether its task ended (lost) and how many terminal events it got (double). The audit runs
 * after the mesh was SIGKILLed, on a nats-server the drill starts over the mesh's JetStream store:
 * a graceful shutdown would end in-flight tasks itself and hide what the fault really left behind.
 */
import { readFile } from 'node:fs/promises';
import { jetstream } from '@nats-io/jetstream';
import { fromDist } from './mesh.mjs';

const EVENTS_STREAM = 'AMF_EVENTS';

/**
 * Every event of AMF_EVENTS in stream order, as `{type, subject, taskId, payload}`, read over an
 * open coordinator-role connection with an ordered consumer (ephemeral, gap-free, no durable state).
 */
export async function readEvents(nc) {
  const js = jetstream(nc);
  const info = await (await js.jetstreamManager()).streams.info(EVENTS_STREAM);
  const total = info.state.messages;
  const events = [];
  const consumer = await js.consumers.get(EVENTS_STREAM);
  while (events.length < total) {
    const batch = await consumer.fetch({ max_messages: 1000, expires: 2000 });
    let got = 0;
    for await (const m of batch) {
      got++;
      events.push(toEvent(m.subject, m.json()));
      if (m.info.pending === 0) break;
    }
    if (got === 0) break; // retention removed some since the info: use what is there
  }
  return events;
}

/** Reads the events over the mesh's own (live) NATS; undefined when it cannot be reached. */
export async function readEventsLive(natsUrl, credentials) {
  const { connectAs } = await fromDist('fabric/connect.js');
  let nc;
  try {
    nc = await connectAs(natsUrl, credentials.coordinator, 'amf-fault-drill-audit', {
      maxReconnectAttempts: 0,
    });
    return await readEvents(nc);
  } catch {
    return undefined;
  } finally {
    await nc?.close().catch(() => undefined);
  }
}

/**
 * Reads the events of a dead mesh: starts a nats-server of its own over the JetStream store in
 * `<storeDir>/nats` (a coordinator's data dir, or the drill's external NATS dir).
 */
export async function readEventsOffline(storeDir, credentials, run) {
  const { startNatsServer } = await fromDist('fabric/natsServer/supervisor.js');
  const { connectAs } = await fromDist('fabric/connect.js');
  const server = await startNatsServer({
    dataDir: storeDir,
    credentials,
    readyTimeoutMs: 20_000,
    logger: (line) => run.appendLog('audit-nats', line),
  });
  run.trackPid(server.pid);
  try {
    const nc = await connectAs(server.url, credentials.coordinator, 'amf-fault-drill-audit', {
      maxReconnectAttempts: 0,
    });
    try {
      return await readEvents(nc);
    } finally {
      await nc.close();
    }
  } finally {
    await server.close();
  }
}

function toEvent(subject, ce) {
  // AMF events carry `data: {payload, auth_context}`: the payload is one level down.
  const data = typeof ce?.data === 'object' && ce.data !== null ? ce.data : {};
  const payload = typeof data.payload === 'object' && data.payload !== null ? data.payload : data;
  return {
    type: ce?.type ?? subject,
    subject,
    taskId: ce?.amftaskid ?? payload.task_id,
    payload,
  };
}

/**
 * A terminal event: the canonical final, or a coordinator notice that says it ends the task
 * (`payload.terminal`). Failures are an `amf.policy.deny`; TTL expiry is, in today's code, an
 * `amf.policy.warning` with terminal: true (coordinator/tasks/retries.ts), so both notice types
 * count, and the report names the kind so the difference stays visible.
 */
export function isTerminal(e) {
  return (
    e.type === 'amf.result.final' ||
    ((e.type === 'amf.policy.deny' || e.type === 'amf.policy.warning') && e.payload.terminal === true)
  );
}

function terminalKind(e) {
  return e.type === 'amf.result.final'
    ? 'final'
    : `${e.type.slice('amf.policy.'.length)} ${e.payload.reason ?? '?'}`;
}

/**
 * Joins the client's records with the stream. A request's task is the one whose announcement
 * carries its marker (or the id the response header named). Lost: a request that has a task and no
 * terminal event; double: a task with more than one. Wrong: a request answered 200 with another
 * answer than its own task's (the drill's handler echoes the request), or answered otherwise than
 * its task's record says (200 for a task that failed, an error for one that completed); requests
 * without an HTTP answer (a cut socket, a client time-out) are not compared. With `runs` (task id →
 * handler runs to the end, handler.mjs), ranTwice: tasks run more than once. Requests whose task
 * never reached the stream were never accepted (refused before announcement) and are only
 * client-visible errors.
 */
export function auditRecords(records, events, markerRe, runs) {
  const taskOfMarker = new Map();
  const terminals = new Map();
  const firstTerminal = new Map();
  const terminalKinds = new Map();
  for (const e of events) {
    if (e.type === 'amf.task.announce' && e.taskId) {
      const m = JSON.stringify(e.payload.task ?? e.payload).match(markerRe);
      if (m) taskOfMarker.set(m[0], e.taskId);
    }
    if (isTerminal(e) && e.taskId) {
      terminals.set(e.taskId, (terminals.get(e.taskId) ?? 0) + 1);
      if (!firstTerminal.has(e.taskId))
        firstTerminal.set(e.taskId, e.type === 'amf.result.final' && e.payload.status === 'completed');
      const kind = terminalKind(e);
      terminalKinds.set(kind, (terminalKinds.get(kind) ?? 0) + 1);
    }
  }
  let accepted = 0;
  const lost = [];
  const double = [];
  const wrong = [];
  const ranTwice = [];
  const sweptTasks = new Set(
    events
      .filter((e) => isTerminal(e) && e.payload.reason === 'coordinator_lost' && e.taskId)
      .map((e) => e.taskId),
  );
  for (const r of records) {
    const marker = r.text.match(markerRe)?.[0];
    if (r.ok && r.content !== `done: ${r.text}`)
      wrong.push({ marker, why: `answered ${JSON.stringify(r.content)?.slice(0, 80)}` });
    // A streamed answer pieced from two executions' chunks: an answer no execution produced.
    if (r.spliced) wrong.push({ marker, why: 'streamed chunks of two executions' });
    const taskId = r.taskId ?? (marker ? taskOfMarker.get(marker) : undefined);
    if (taskId === undefined) continue;
    accepted++;
    const n = terminals.get(taskId) ?? 0;
    if (n === 0) lost.push({ marker, taskId, reason: r.reason ?? 'answered 200' });
    if (n > 1) double.push({ marker, taskId, terminals: n });
    const completed = firstTerminal.get(taskId);
    if (completed !== undefined && r.status > 0 && completed !== r.ok)
      wrong.push({
        marker,
        taskId,
        why: `client ${r.ok ? '200' : r.reason}, record ${completed ? 'completed' : 'failed'}`,
      });
    const ran = runs?.get(taskId) ?? 0;
    if (ran > 1) ranTwice.push({ marker, taskId, runs: ran });
    // Failed by the sweeper for good, yet run to its end by a worker: it was not withdrawn.
    if (ran > 0 && sweptTasks.has(taskId)) wrong.push({ marker, taskId, why: 'ran after coordinator_lost' });
  }
  return { accepted, lost, double, wrong, ranTwice, terminalKinds: Object.fromEntries(terminalKinds) };
}

/** Handler runs per task id from a run log (one task id a line, handler.mjs); empty when absent. */
export async function readRunLog(file) {
  const runs = new Map();
  let text = '';
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return runs;
  }
  for (const id of text.split('\n')) if (id !== '') runs.set(id, (runs.get(id) ?? 0) + 1);
  return runs;
}
