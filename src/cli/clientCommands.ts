/**
 * Commands that talk to a running coordinator over HTTP: `send`, `events`, `agents`, `agents forget`,
 * `agents disable`, `agents enable`, `audit`, `publish`. They return an exit code and print errors the coordinator sent, so scripts can
 * rely on both; a coordinator that cannot be reached, or that goes away while a command waits on it
 * (a stream that ends early, an answer cut off), is named with its URL, and the exit code is 1.
 */
import type { AmfConfig } from '../config/config.js';
import { createEvent } from '../events/cloudEvent.js';
import { AMF_EVENT_TYPES, isAmfEventType } from '../events/eventTypes.js';
import { plainGet, type PlainAnswer } from './plainGet.js';
import { formatEventLine, isHeartbeatEvent } from './eventLine.js';
import { formatTable } from './textTable.js';

/** The request headers, with the operator key the command resolved (operatorKeyLookup.ts). */
function headers(config: AmfConfig, extra: Record<string, string> = {}): Record<string, string> {
  return config.coordinator.apiKey
    ? { authorization: `Bearer ${config.coordinator.apiKey}`, ...extra }
    : extra;
}

function endpoint(config: AmfConfig, path: string): URL {
  return new URL(path, config.coordinator.url);
}

const NETWORK_CODES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  ETIMEDOUT: 'timed out',
  ECONNRESET: 'connection reset',
  EHOSTUNREACH: 'host unreachable',
};

/** The network reason of a failed request or read, in words ("connection refused"). */
function networkReason(err: unknown): string {
  // fetch wraps the socket error in `cause`; node:http (plainGet) rejects with it directly.
  const cause =
    (err as { cause?: { code?: string; message?: string } }).cause ??
    (err as { code?: string; message?: string });
  return (cause?.code && NETWORK_CODES[cause.code]) ?? cause?.message ?? (err as Error).message;
}

/** What to tell a person whose command could not reach the coordinator at all. */
export function unreachableMessage(command: string, url: URL, err: unknown): string {
  const why = networkReason(err);
  return (
    `amf ${command}: cannot reach the coordinator at ${url.origin} (${why}).\n` +
    `  Start one with \`amf up\` (or \`npm start\` in a checkout), or point --coordinator or ` +
    `AMF_COORDINATOR_URL at a running one.\n`
  );
}

/** What to tell a person whose coordinator went away while the command waited on it. */
export function goneMessage(command: string, url: URL, why: string): string {
  return (
    `amf ${command}: the coordinator at ${url.origin} went away (${why}).\n` +
    `  Check that it is still running (\`amf up\`), then try again.\n`
  );
}

/** The body of `res` as text, or undefined after saying that the coordinator went away mid-answer. */
async function bodyText(command: string, url: URL, res: Response): Promise<string | undefined> {
  try {
    return await res.text();
  } catch (err) {
    process.stderr.write(goneMessage(command, url, `the answer was cut off: ${networkReason(err)}`));
    return undefined;
  }
}

/** fetch, or undefined after printing which coordinator URL could not be reached. */
async function reach(command: string, url: URL, init: RequestInit): Promise<Response | undefined> {
  try {
    return await fetch(url, init);
  } catch (err) {
    process.stderr.write(unreachableMessage(command, url, err));
    return undefined;
  }
}

/** plainGet, or undefined after printing which coordinator URL could not be reached. */
async function reachPlain(
  command: string,
  url: URL,
  requestHeaders: Record<string, string>,
): Promise<PlainAnswer | undefined> {
  try {
    return await plainGet(url, requestHeaders);
  } catch (err) {
    process.stderr.write(unreachableMessage(command, url, err));
    return undefined;
  }
}

async function failure(res: Response): Promise<string> {
  const text = await res.text().catch((err: unknown) => `(the answer was cut off: ${networkReason(err)})`);
  return failureText(res.status, text);
}

function failureText(status: number, text: string): string {
  try {
    const body = JSON.parse(text) as {
      error?: { message?: string; reasons?: string[]; candidates?: string[] };
    };
    // Reasons of a refusal, or the agents a short name could mean (registry/agentNames.ts).
    const list = body.error?.reasons ?? body.error?.candidates;
    const reasons = list ? `\n  - ${list.join('\n  - ')}` : '';
    return `HTTP ${status}: ${body.error?.message ?? text}${reasons}`;
  } catch {
    return `HTTP ${status}: ${text.slice(0, 500)}`;
  }
}

/** One frame of an SSE stream: its `data:` payload, or a comment (`: keepalive`) without the colon. */
type SseFrame = { data: string } | { comment: string };

/** Yields the frames of an SSE response body; rejects when the connection is lost mid-stream. */
async function* sseFrames(res: Response): AsyncGenerator<SseFrame> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const lines = frame.split('\n');
      const data = lines
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      if (data) yield { data };
      else if (lines[0]?.startsWith(':')) yield { comment: lines[0].slice(1).trim() };
      end = buffer.indexOf('\n\n');
    }
  }
}

/** `amf send --tag TAG TEXT`: one chat completion for model amf/TAG. */
export async function sendCommand(
  config: AmfConfig,
  tag: string,
  text: string,
  stream: boolean,
): Promise<number> {
  const url = endpoint(config, '/v1/chat/completions');
  const res = await reach('send', url, {
    method: 'POST',
    headers: headers(config, { 'content-type': 'application/json' }),
    body: JSON.stringify({ model: `amf/${tag}`, messages: [{ role: 'user', content: text }], stream }),
  });
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf send: ${await failure(res)}\n`);
    return 1;
  }
  // Named when the answer is cut off: the task may still end, and GET /tasks/<id> tells how.
  const task = res.headers.get('x-amf-task-id');
  const lookUp = task ? `; task ${task} may still finish: GET /tasks/${task} tells` : '';
  if (!stream) {
    const body = await bodyText('send', url, res);
    if (body === undefined) return 1;
    const answer = JSON.parse(body) as { choices: Array<{ message: { content: string } }> };
    process.stdout.write(`${answer.choices[0]?.message.content ?? ''}\n`);
    return 0;
  }
  try {
    for await (const frame of sseFrames(res)) {
      if (!('data' in frame)) continue;
      if (frame.data === '[DONE]') {
        process.stdout.write('\n');
        return 0;
      }
      const chunk = JSON.parse(frame.data) as {
        error?: { message: string };
        choices?: Array<{ delta?: { content?: string } }>;
      };
      if (chunk.error) {
        process.stderr.write(`\namf send: ${chunk.error.message}\n`);
        return 1;
      }
      process.stdout.write(chunk.choices?.[0]?.delta?.content ?? '');
    }
  } catch (err) {
    process.stderr.write(
      '\n' + goneMessage('send', url, `the answer was cut off: ${networkReason(err)}${lookUp}`),
    );
    return 1;
  }
  // The stream ended without [DONE]: the coordinator stopped without saying so.
  process.stderr.write('\n' + goneMessage('send', url, `the answer ended without [DONE]${lookUp}`));
  return 1;
}

/** What `amf events` prints: which events, and how. */
export interface EventsOptions {
  /** NATS subject filter, e.g. `amf.task.>`. */
  subject: string;
  /** The whole CloudEvent as one JSON line (for scripts), instead of a summary line. */
  json: boolean;
  /** Also heartbeats (one per agent every few seconds), left out by default. */
  heartbeats: boolean;
}

/**
 * `amf events`: prints each event as it happens, one line each (`--json`: the whole event), until
 * interrupted. The stream ending is never a success: the coordinator stopped (it says so in the
 * stream's last frame) or the connection was lost, and either is named with exit code 1.
 */
export async function eventsCommand(config: AmfConfig, options: EventsOptions): Promise<number> {
  const url = endpoint(config, '/events');
  url.searchParams.set('subject', options.subject);
  const res = await reach('events', url, { headers: headers(config, { accept: 'text/event-stream' }) });
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf events: ${await failure(res)}\n`);
    return 1;
  }
  process.stderr.write(
    `amf events: ${options.subject} from ${url.origin}${options.heartbeats ? '' : ', without heartbeats'} (Ctrl-C to stop)\n`,
  );
  // `amf events | head` closes stdout: that ends the command, quietly and successfully.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
  let stopping = false;
  try {
    for await (const frame of sseFrames(res)) {
      if (!('data' in frame)) {
        if (frame.comment.startsWith('closing')) stopping = true;
        continue;
      }
      let event: unknown;
      try {
        event = JSON.parse(frame.data);
      } catch {
        event = undefined;
      }
      if (!options.heartbeats && isHeartbeatEvent(event)) continue;
      process.stdout.write(`${options.json || event === undefined ? frame.data : formatEventLine(event)}\n`);
    }
  } catch (err) {
    process.stderr.write(goneMessage('events', url, `the event stream was cut: ${networkReason(err)}`));
    return 1;
  }
  process.stderr.write(
    goneMessage('events', url, stopping ? 'it is stopping' : 'it ended the event stream without saying why'),
  );
  return 1;
}

/** How a listing is printed: a table with a header row for people, JSON for scripts. */
export type ListingFormat = 'table' | 'json';

/** `amf agents`: a table (or JSON) of the registry. */
export async function agentsCommand(config: AmfConfig, format: ListingFormat): Promise<number> {
  const res = await reachPlain('agents', endpoint(config, '/agents'), headers(config));
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf agents: ${failureText(res.status, res.text)}\n`);
    return 1;
  }
  const body = JSON.parse(res.text) as {
    agents: Array<{ agent_id: string; status: string; capability_tags: string[]; endpoint: string }>;
  };
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
    return 0;
  }
  if (body.agents.length === 0) {
    process.stdout.write('no agents\n');
    return 0;
  }
  const rows = body.agents.map((a) => [a.status, a.agent_id, a.capability_tags.join(','), a.endpoint]);
  process.stdout.write(
    formatTable(
      [{ header: 'STATUS' }, { header: 'AGENT' }, { header: 'TAGS' }, { header: 'ENDPOINT' }],
      rows,
    ),
  );
  return 0;
}

/**
 * `amf agents forget ID`: removes an agent (live or not) from the coordinator's registry and unbinds
 * its key. ID is the agent id or its short name (`summarizer`), which the coordinator resolves
 * (registry/agentNames.ts); a name several agents share is refused with their ids.
 */
export async function forgetAgentCommand(config: AmfConfig, agentId: string): Promise<number> {
  const url = endpoint(config, `/agents/${encodeURIComponent(agentId)}`);
  const res = await reach('agents forget', url, { method: 'DELETE', headers: headers(config) });
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf agents forget: ${await failure(res)}\n`);
    return 1;
  }
  const text = await bodyText('agents forget', url, res);
  if (text === undefined) return 1;
  const body = JSON.parse(text) as { forgotten?: string };
  process.stdout.write(`forgot ${body.forgotten ?? agentId}\n`);
  return 0;
}

/**
 * `amf agents disable ID` / `amf agents enable ID`: takes an agent out of service (it stays admitted
 * and connected, finishes what it holds and gets no new work: registry/disablements.ts) or puts it
 * back. ID may be the agent's short name, as for `forget`.
 */
export async function switchAgentCommand(
  config: AmfConfig,
  agentId: string,
  action: 'disable' | 'enable',
): Promise<number> {
  const what = `agents ${action}`;
  const url = endpoint(config, `/agents/${encodeURIComponent(agentId)}/${action}`);
  const res = await reach(what, url, { method: 'POST', headers: headers(config) });
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf ${what}: ${await failure(res)}
`);
    return 1;
  }
  const text = await bodyText(what, url, res);
  if (text === undefined) return 1;
  const body = JSON.parse(text) as { agent_id?: string; status?: string; changed?: boolean };
  const id = body.agent_id ?? agentId;
  const line =
    action === 'disable'
      ? body.changed === false
        ? `${id} was disabled already\n`
        : `disabled ${id}: it finishes what it holds and gets no new work (amf agents enable to undo)\n`
      : body.changed === false
        ? `${id} was not disabled (${body.status ?? 'unknown'})\n`
        : `enabled ${id}: ${body.status ?? 'unknown'}, offered work again\n`;
  process.stdout.write(line);
  return 0;
}

/**
 * `amf agents approve ID [--key NKEY]`: lets a pending agent (heard on mDNS only) in. With a key its
 * key is enrolled and the agent connects with it; without one it becomes live at once. `--key`
 * names the key the operator expects, so a listing that names another one by now is refused. ID
 * may be the agent's short name, as for `forget`.
 */
export async function approveAgentCommand(
  config: AmfConfig,
  agentId: string,
  nkey?: string,
): Promise<number> {
  const url = endpoint(config, `/agents/${encodeURIComponent(agentId)}/approve`);
  const res = await reach('agents approve', url, {
    method: 'POST',
    headers: headers(config, { 'content-type': 'application/json' }),
    body: JSON.stringify(nkey !== undefined ? { nkey } : {}),
  });
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf agents approve: ${await failure(res)}\n`);
    return 1;
  }
  const text = await bodyText('agents approve', url, res);
  if (text === undefined) return 1;
  const body = JSON.parse(text) as { approved?: string; status?: string; enrollment?: { nkey?: string } };
  const id = body.approved ?? agentId;
  process.stdout.write(
    body.enrollment?.nkey
      ? `approved ${id}: key ${body.enrollment.nkey} enrolled; it is live once it connects with that key\n`
      : `approved ${id}: ${body.status ?? 'live'}\n`,
  );
  return 0;
}

/** `amf audit [--limit N] [-o json]`: the newest MCP call audit records, newest first. */
export async function auditCommand(config: AmfConfig, limit: number, format: ListingFormat): Promise<number> {
  const url = endpoint(config, '/audit');
  url.searchParams.set('limit', String(limit));
  const res = await reachPlain('audit', url, headers(config));
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf audit: ${failureText(res.status, res.text)}\n`);
    return 1;
  }
  const body = JSON.parse(res.text) as {
    records: Array<{
      time: string;
      caller: string;
      wire_name: string;
      tool: string | null;
      decision: string;
      reasons: string[];
      outcome: string;
      duration_ms: number;
    }>;
  };
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
    return 0;
  }
  if (body.records.length === 0) {
    process.stdout.write('no audit records\n');
    return 0;
  }
  const rows = body.records.map((r) => [
    r.time,
    r.decision,
    r.outcome,
    `${r.duration_ms}ms`,
    r.caller,
    `${r.tool ?? r.wire_name}${r.reasons.length > 0 ? ` (${r.reasons.join(',')})` : ''}`,
  ]);
  process.stdout.write(
    formatTable(
      [
        { header: 'TIME' },
        { header: 'DECISION' },
        { header: 'OUTCOME' },
        { header: 'DURATION', align: 'right' },
        { header: 'CALLER' },
        { header: 'TOOL' },
      ],
      rows,
    ),
  );
  return 0;
}

/** `amf publish TYPE --data JSON`: a structured-mode CloudEvent to `POST /publish`. */
export async function publishCommand(
  config: AmfConfig,
  type: string,
  data: string,
  taskId?: string,
): Promise<number> {
  if (!isAmfEventType(type)) {
    process.stderr.write(
      `amf publish: unknown event type "${type}": expected one of the ${AMF_EVENT_TYPES.length} amf.* types\n`,
    );
    return 1;
  }
  let payload: unknown;
  try {
    payload = JSON.parse(data);
  } catch (err) {
    process.stderr.write(`amf publish: --data is not valid JSON: ${(err as Error).message}\n`);
    return 1;
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    process.stderr.write('amf publish: --data must be a JSON object\n');
    return 1;
  }
  // The coordinator replaces the sender with the authenticated caller (anonymous, or the operator
  // with its key); the CLI claims no role it does not have.
  const event = createEvent({
    type,
    sender: {
      identity: 'amf:cli',
      source: 'urn:amf:cli',
      role: 'connector',
      trustDomain: config.identity.trustDomain,
    },
    payload,
    ...(taskId ? { taskId } : {}),
  });
  const res = await reach('publish', endpoint(config, '/publish'), {
    method: 'POST',
    headers: headers(config, { 'content-type': 'application/cloudevents+json' }),
    body: JSON.stringify(event),
  });
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf publish: ${await failure(res)}\n`);
    return 1;
  }
  const reply = await bodyText('publish', endpoint(config, '/publish'), res);
  if (reply === undefined) return 1;
  process.stdout.write(`${reply}\n`);
  return 0;
}
