/**
 * One fabric event as one line for a person watching `amf events`: time, type, task, agent and a
 * short summary of what happened, so a task reads as a few lines instead of kilobytes of JSON
 * (`--json` prints the whole event for scripts). Events come from the coordinator's stream and are
 * read defensively: a field that is missing or of another type is left out, never an error.
 */
import { shortAgentName } from '../registry/agentNames.js';

/** Characters of a task id shown (as the console does); `--json` has the whole id. */
const TASK_ID_CHARS = 8;
const SUMMARY_TEXT_CHARS = 60;
const TYPE_WIDTH = 18;
const AGENT_WIDTH = 16;

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** `text` as a JSON string on one line, cut to `max` characters with an ellipsis. */
function quoted(text: string, max = SUMMARY_TEXT_CHARS): string {
  const cut = text.length > max ? `${text.slice(0, max)}…` : text;
  return JSON.stringify(cut);
}

/** True for `amf.discovery.agent.heartbeat`, which `amf events` leaves out unless asked. */
export function isHeartbeatEvent(event: unknown): boolean {
  return isObject(event) && event.type === 'amf.discovery.agent.heartbeat';
}

/** HH:MM:SS.mmm of the event's time, in local time (the time it was read when it has none). */
function clock(time: unknown): string {
  const d = typeof time === 'string' ? new Date(time) : new Date();
  const at = Number.isNaN(d.getTime()) ? new Date() : d;
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}.${String(at.getMilliseconds()).padStart(3, '0')}`;
}

/** What the event says, in a few words, by type. */
function summary(type: string, p: Json): string {
  switch (type) {
    case 'amf.task.announce': {
      const attempt = typeof p.attempt === 'number' && p.attempt > 1 ? ` (attempt ${p.attempt})` : '';
      return `${str(p.required_capability) ?? '?'}: ${quoted(str(p.task) ?? '')}${attempt}`;
    }
    case 'amf.task.claim':
      return `claimed${typeof p.attempt === 'number' && p.attempt > 1 ? ` (attempt ${p.attempt})` : ''}`;
    case 'amf.task.delegate':
      return `to ${str(p.required_capability) ?? '?'} as ${(str(p.child_task_id) ?? '?').slice(0, TASK_ID_CHARS)}: ${quoted(str(p.task) ?? '')}`;
    case 'amf.task.progress': {
      const percent = typeof p.percent === 'number' ? `${p.percent}%` : '';
      const message = str(p.message);
      return [percent, message === undefined ? '' : quoted(message)].filter(Boolean).join(' ') || 'progress';
    }
    case 'amf.task.blocked':
      return `blocked: ${quoted(str(p.reason) ?? '')}`;
    case 'amf.task.cancel':
      return `${str(p.reason) ?? 'cancelled'}: ${str(p.message) ?? ''}`.trim();
    case 'amf.task.input':
      return `input ${quoted(str(p.text) ?? '')}`;
    case 'amf.result.partial':
      return `#${typeof p.seq === 'number' ? p.seq : '?'} ${quoted(str(p.delta) ?? '')}`;
    case 'amf.result.final': {
      if (p.status === 'completed') {
        const result = isObject(p.result) ? p.result : {};
        return `completed: ${quoted(str(result.text) ?? '')}`;
      }
      const error = isObject(p.error) ? p.error : {};
      return `failed: ${[str(error.code), str(error.message)].filter(Boolean).join(': ') || 'no reason given'}`;
    }
    case 'amf.policy.warning':
    case 'amf.policy.deny': {
      const state = p.terminal === true ? ` (task ${str(p.state) ?? 'ended'})` : '';
      return `${str(p.reason) ?? '?'}: ${str(p.message) ?? ''}${state}`;
    }
    case 'amf.discovery.capability.advertise': {
      const tags = Array.isArray(p.capability_tags)
        ? p.capability_tags.filter((t) => typeof t === 'string')
        : [];
      return `${str(p.change) ?? 'advertised'} [${tags.join(',')}] at ${str(p.endpoint) ?? '?'}`;
    }
    case 'amf.discovery.agent.heartbeat':
      return `${str(p.status) ?? 'active'} at ${str(p.endpoint) ?? '?'}`;
    default:
      // Artifacts, evidence and anything newer: its payload, cut short.
      return quoted(JSON.stringify(p), SUMMARY_TEXT_CHARS);
  }
}

/**
 * `event` (a parsed CloudEvent from `GET /events`) as one line without a newline:
 * `HH:MM:SS.mmm  TYPE  TASK  AGENT  SUMMARY`. TASK is the first characters of the task id, `-` for
 * events of no task; AGENT is the short name of the agent the event is about (its payload's
 * `agent_id`), else of its sender.
 */
export function formatEventLine(event: unknown): string {
  const e = isObject(event) ? event : {};
  const type = str(e.type) ?? '?';
  const data = isObject(e.data) ? e.data : {};
  const payload = isObject(data.payload) ? data.payload : {};
  const auth = isObject(data.auth_context) ? data.auth_context : {};
  const taskId = str(e.amftaskid) ?? str(payload.task_id) ?? str(payload.parent_task_id);
  const agentId = str(payload.agent_id) ?? str(auth.identity) ?? str(e.source);
  const text = summary(type, payload).replace(/[\r\n]+/g, ' ');
  return [
    clock(e.time),
    type.padEnd(TYPE_WIDTH),
    (taskId?.slice(0, TASK_ID_CHARS) ?? '-').padEnd(TASK_ID_CHARS),
    (agentId === undefined ? '-' : shortAgentName(agentId)).padEnd(AGENT_WIDTH),
    text,
  ].join('  ');
}
