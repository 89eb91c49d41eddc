/**
 * Commands that talk to a running coordinator over HTTP: `send`, `events`, `agents`, `agents forget`,
 * `audit`, `publish`. They return an exit code and print errors the coordinator sent, so scripts can
 * rely on both; a coordinator that cannot be reached is named with its URL and what to do.
 */
import type { AmfConfig } from '../config/config.js';
import { createEvent } from '../events/cloudEvent.js';
import { AMF_EVENT_TYPES, isAmfEventType } from '../events/eventTypes.js';
import { plainGet, type PlainAnswer } from './plainGet.js';

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

/** What to tell a person whose command could not reach the coordinator at all. */
export function unreachableMessage(command: string, url: URL, err: unknown): string {
  // fetch wraps the socket error in `cause`; node:http (plainGet) rejects with it directly.
  const cause =
    (err as { cause?: { code?: string; message?: string } }).cause ??
    (err as { code?: string; message?: string });
  const why = (cause?.code && NETWORK_CODES[cause.code]) ?? cause?.message ?? (err as Error).message;
  return (
    `amf ${command}: cannot reach the coordinator at ${url.origin} (${why}).\n` +
    `  Start one with \`amf up\` (or \`npm start\` in a checkout), or point --coordinator or ` +
    `AMF_COORDINATOR_URL at a running one.\n`
  );
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
  return failureText(res.status, await res.text());
}

function failureText(status: number, text: string): string {
  try {
    const body = JSON.parse(text) as { error?: { message?: string; reasons?: string[] } };
    const reasons = body.error?.reasons ? `\n  - ${body.error.reasons.join('\n  - ')}` : '';
    return `HTTP ${status}: ${body.error?.message ?? text}${reasons}`;
  } catch {
    return `HTTP ${status}: ${text.slice(0, 500)}`;
  }
}

/** Yields the `data:` payloads of an SSE response body. */
async function* sseData(res: Response): AsyncGenerator<string> {
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
      const data = frame
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      if (data) yield data;
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
  const res = await reach('send', endpoint(config, '/v1/chat/completions'), {
    method: 'POST',
    headers: headers(config, { 'content-type': 'application/json' }),
    body: JSON.stringify({ model: `amf/${tag}`, messages: [{ role: 'user', content: text }], stream }),
  });
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf send: ${await failure(res)}\n`);
    return 1;
  }
  if (!stream) {
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    process.stdout.write(`${body.choices[0]?.message.content ?? ''}\n`);
    return 0;
  }
  for await (const data of sseData(res)) {
    if (data === '[DONE]') break;
    const chunk = JSON.parse(data) as {
      error?: { message: string };
      choices?: Array<{ delta?: { content?: string } }>;
    };
    if (chunk.error) {
      process.stderr.write(`\namf send: ${chunk.error.message}\n`);
      return 1;
    }
    process.stdout.write(chunk.choices?.[0]?.delta?.content ?? '');
  }
  process.stdout.write('\n');
  return 0;
}

/** `amf events`: prints each event as one JSON line until interrupted. */
export async function eventsCommand(config: AmfConfig, subject: string): Promise<number> {
  const url = endpoint(config, '/events');
  url.searchParams.set('subject', subject);
  const res = await reach('events', url, { headers: headers(config, { accept: 'text/event-stream' }) });
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf events: ${await failure(res)}\n`);
    return 1;
  }
  for await (const data of sseData(res)) process.stdout.write(`${data}\n`);
  return 0;
}

/** `amf agents`: a table (or JSON) of the registry. */
export async function agentsCommand(config: AmfConfig, json: boolean): Promise<number> {
  const res = await reachPlain('agents', endpoint(config, '/agents'), headers(config));
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf agents: ${failureText(res.status, res.text)}\n`);
    return 1;
  }
  const body = JSON.parse(res.text) as {
    agents: Array<{ agent_id: string; status: string; capability_tags: string[]; endpoint: string }>;
  };
  if (json) {
    process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
    return 0;
  }
  if (body.agents.length === 0) {
    process.stdout.write('no agents\n');
    return 0;
  }
  const rows = body.agents.map((a) => [a.status, a.agent_id, a.capability_tags.join(','), a.endpoint]);
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const r of rows)
    process.stdout.write(`${r.map((c, i) => (i < 3 ? c.padEnd(widths[i]!) : c)).join('  ')}\n`);
  return 0;
}

/** `amf agents forget ID`: removes an agent (live or not) from the coordinator's registry and unbinds its key. */
export async function forgetAgentCommand(config: AmfConfig, agentId: string): Promise<number> {
  const url = endpoint(config, `/agents/${encodeURIComponent(agentId)}`);
  const res = await reach('agents forget', url, { method: 'DELETE', headers: headers(config) });
  if (!res) return 1;
  if (!res.ok) {
    process.stderr.write(`amf agents forget: ${await failure(res)}\n`);
    return 1;
  }
  process.stdout.write(`forgot ${agentId}\n`);
  return 0;
}

/**
 * `amf agents approve ID [--key NKEY]`: lets a pending agent (heard on mDNS only) in. With a key its
 * key is enrolled and the agent connects with it; without one it becomes live at once. `--key`
 * names the key the operator expects, so a listing that names another one by now is refused.
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
  const body = (await res.json()) as { status?: string; enrollment?: { nkey?: string } };
  process.stdout.write(
    body.enrollment?.nkey
      ? `approved ${agentId}: key ${body.enrollment.nkey} enrolled; it is live once it connects with that key\n`
      : `approved ${agentId}: ${body.status ?? 'live'}\n`,
  );
  return 0;
}

/** `amf audit [--limit N] [--json]`: the newest MCP call audit records, newest first. */
export async function auditCommand(config: AmfConfig, limit: number, json: boolean): Promise<number> {
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
  if (json) {
    process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
    return 0;
  }
  if (body.records.length === 0) {
    process.stdout.write('no audit records\n');
    return 0;
  }
  for (const r of body.records) {
    const why = r.reasons.length > 0 ? ` (${r.reasons.join(',')})` : '';
    process.stdout.write(
      `${r.time}  ${r.decision.padEnd(5)}  ${r.outcome.padEnd(10)}  ${String(r.duration_ms).padStart(5)}ms  ${r.caller}  ${r.tool ?? r.wire_name}${why}\n`,
    );
  }
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
  process.stdout.write(`${await res.text()}\n`);
  return 0;
}
