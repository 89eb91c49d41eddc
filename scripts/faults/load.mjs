/**
 * The drill's load: N chat completions at concurrency C against the coordinator's OpenAI endpoint,
 * one task each. Every request carries a unique marker in its text, so the audit can find its task
 * in AMF_EVENTS even when the client never learnt the task id (a reset connection, a timeout).
 */
import { setTimeout as delay } from 'node:timers/promises';

/**
 * One request: what the client saw. `reason` is set for every request not answered 200. With
 * `stream`, the answer is read as OpenAI's SSE chunks: the handler tags each chunk with its worker
 * (handler.mjs), so `spliced` says the answer was pieced from two executions; an error event in the
 * stream makes the request not ok (`stream <code>`).
 */
export async function sendOne(url, tag, text, timeoutMs, stream = false) {
  const started = Date.now();
  const record = {
    text,
    status: 0,
    ok: false,
    reason: undefined,
    taskId: undefined,
    ms: 0,
    content: undefined,
  };
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: `amf/${tag}`,
        messages: [{ role: 'user', content: text }],
        ...(stream ? { stream: true } : {}),
      }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    record.status = res.status;
    record.taskId = res.headers.get('x-amf-task-id') ?? undefined;
    const body = await res.text();
    if (res.status === 200 && stream) Object.assign(record, readStream(body));
    else if (res.status === 200) {
      record.ok = true;
      record.content = answerText(body);
    } else record.reason = `HTTP ${res.status} ${errorCode(body)}`;
  } catch (err) {
    record.reason = networkReason(err);
  }
  record.ms = Date.now() - started;
  return record;
}

/** What a streamed answer held: its text without the workers' tags, whose chunks, and any error. */
function readStream(body) {
  const workers = new Set();
  let content = '';
  let error;
  for (const frame of body.split('\n\n')) {
    if (!frame.startsWith('data: ') || frame === 'data: [DONE]') continue;
    let chunk;
    try {
      chunk = JSON.parse(frame.slice('data: '.length));
    } catch {
      continue;
    }
    if (chunk.error) error = String(chunk.error.code ?? chunk.error.type ?? 'error');
    const delta = chunk.choices?.[0]?.delta?.content;
    if (typeof delta !== 'string') continue;
    content += delta.replace(/⟦([^⟧]*)⟧/g, (_m, w) => {
      workers.add(w);
      return '';
    });
  }
  return error
    ? { ok: false, reason: `stream ${error}`, content, spliced: workers.size > 1 }
    : { ok: true, content, spliced: workers.size > 1 };
}

/** OpenAI error bodies say `{error: {code, type, message}}`; the code is what groups well. */
function errorCode(body) {
  try {
    const e = JSON.parse(body).error;
    return String(e?.code ?? e?.type ?? 'unknown');
  } catch {
    return 'non-JSON body';
  }
}

/** The answer of a 200 chat completion (the audit checks it is this request's own). */
function answerText(body) {
  try {
    return JSON.parse(body).choices?.[0]?.message?.content;
  } catch {
    return undefined;
  }
}

/** fetch wraps socket errors as `TypeError: fetch failed` with the errno code in `cause`. */
function networkReason(err) {
  if (err?.name === 'TimeoutError') return 'client timeout';
  const code = err?.cause?.code ?? err?.cause?.name ?? err?.name ?? 'error';
  return `network ${code}`;
}

/**
 * Runs the load. `target()` is read for every request, so a fault may move the client elsewhere;
 * `marker(i)` names request i. Resolves with one record per request, in request order.
 */
export async function runLoad({ target, tag, requests, concurrency, timeoutMs, marker, stream = false }) {
  const records = new Array(requests);
  let next = 0;
  const lane = async () => {
    while (next < requests) {
      const i = next++;
      records[i] = { i, ...(await sendOne(target(i), tag, `${marker(i)} please`, timeoutMs, stream)) };
      // A refused connection returns at once; without a pause one lane would burn the whole load
      // in a few milliseconds of a coordinator restart instead of exercising it over time.
      if (!records[i].ok && records[i].ms < 50) await delay(100);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return records;
}

/**
 * The recovery probe: a fresh request must be answered 200 within `boundMs` with no manual step.
 * Retries (a mesh may need a few seconds to reconnect) and says how long recovery took.
 */
export async function probeRecovery({ url, tag, boundMs, text }) {
  const started = Date.now();
  let last;
  while (Date.now() - started < boundMs) {
    const left = boundMs - (Date.now() - started);
    last = await sendOne(url(), tag, text, Math.max(1000, left));
    if (last.ok) return { recovered: true, seconds: (Date.now() - started) / 1000, last };
    await delay(1000);
  }
  return { recovered: false, seconds: (Date.now() - started) / 1000, last };
}
