/**
 * The worker handler of a bridged A2A agent: a mesh task claimed for one of its tags is sent to the
 * remote agent as an A2A message (streamed when the requester streams), and the remote answer
 * becomes the task's result. Remote failures end the task with a stable `a2a_*` code.
 */
import {
  HandlerError,
  type HandlerResult,
  type TaskContext,
  type WorkerHandler,
} from '../worker/handlerApi.js';
import { AmfError } from '../errors.js';
import { isCapabilityTag } from '../events/subjects.js';
import type { A2aReply } from './replyMapping.js';
import type { RemoteA2aAgent, SendOptions } from './remoteAgent.js';
import type { TagMap } from './skillTags.js';

/** Answer text kept per task: a result travels in one NATS message (1 MiB by default). */
export const MAX_BRIDGED_TEXT_CHARS = 256 * 1024;

/** Structured parts (data parts, file references) kept only while their JSON stays this small. */
const MAX_BRIDGED_DATA_BYTES = 64 * 1024;

/** Strips control, zero-width and bidi characters from remote text shown in our own cards and logs. */
export function plainLabel(value: string, max = 64): string {
  return (
    value
      // eslint-disable-next-line no-control-regex -- removing control characters is the point
      .replace(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g, '')
      .trim()
      .slice(0, max)
  );
}

function resultOf(agentName: string, reply: A2aReply): HandlerResult {
  switch (reply.state) {
    case 'completed':
      break;
    case 'input-required':
    case 'auth-required':
      throw new HandlerError(
        `a2a_${reply.state.replace('-', '_')}`,
        `A2A agent "${agentName}" stopped in state ${reply.state}${reply.text ? `: ${reply.text.slice(0, 500)}` : ''} (a mesh task cannot answer back)`,
      );
    default:
      throw new HandlerError(
        `a2a_task_${reply.state.replace('-', '_')}`,
        `A2A agent "${agentName}" ended the task ${reply.state}${reply.text ? `: ${reply.text.slice(0, 500)}` : ''}`,
      );
  }
  let text = reply.text;
  if (text.length > MAX_BRIDGED_TEXT_CHARS)
    text = `${text.slice(0, MAX_BRIDGED_TEXT_CHARS)}\n[truncated: the A2A agent answered ${reply.text.length} characters]`;
  const a2a: Record<string, unknown> = {
    agent: agentName,
    state: reply.state,
    ...(reply.taskId ? { task_id: reply.taskId } : {}),
    ...(reply.contextId ? { context_id: reply.contextId } : {}),
  };
  const extra = { data: reply.data, files: reply.files };
  if ((reply.data.length || reply.files.length) && JSON.stringify(extra).length <= MAX_BRIDGED_DATA_BYTES)
    Object.assign(a2a, extra);
  return { text, data: { a2a } };
}

function toHandlerError(agentName: string, err: unknown): HandlerError {
  if (err instanceof HandlerError) return err;
  if (err instanceof AmfError) return new HandlerError(`a2a_${err.code.toLowerCase()}`, err.message);
  return new HandlerError('a2a_error', `A2A agent "${agentName}": ${(err as Error).message}`);
}

/** Builds the handler that forwards mesh tasks to `agent`. */
export function createBridgeHandler(
  agent: RemoteA2aAgent,
  agentName: string,
  tags: TagMap,
  url: string,
  timeoutMs?: number,
): WorkerHandler {
  const options = (ctx: TaskContext): SendOptions => {
    const skill = tags.get(ctx.tag);
    return {
      signal: ctx.signal,
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      // `tag` lets an AMF coordinator on the other side route the task to the same capability.
      metadata: {
        ...(skill ? { skill } : {}),
        ...(skill && isCapabilityTag(skill) ? { tag: skill } : {}),
        amf: { task_id: ctx.taskId, trace_id: ctx.traceId, tag: ctx.tag },
      },
    };
  };
  async function* streamed(ctx: TaskContext): AsyncGenerator<string, HandlerResult, undefined> {
    let sent = false;
    let reply: A2aReply | undefined;
    try {
      for await (const step of agent.stream(ctx.text, options(ctx))) {
        if (step.progress) ctx.progress(plainLabel(step.progress, 500));
        if (step.delta) {
          sent = true;
          yield step.delta;
        }
        if (step.reply) reply = step.reply;
      }
    } catch (err) {
      throw toHandlerError(agentName, err);
    }
    if (!reply)
      throw new HandlerError('a2a_error', `A2A agent "${agentName}" closed the stream without an answer`);
    const result = resultOf(agentName, reply);
    if (!sent && result.text) yield result.text;
    return result;
  }
  // Even a non-streaming mesh task is sent as a streaming message (the SDK falls back to a blocking
  // send for agents without streaming): the remote task id arrives first, so a cancelled mesh task
  // can cancel the remote task, and status messages still reach the watchdog as progress.
  async function blocking(ctx: TaskContext): Promise<HandlerResult> {
    let reply: A2aReply | undefined;
    try {
      for await (const step of agent.stream(ctx.text, options(ctx))) {
        if (step.progress) ctx.progress(plainLabel(step.progress, 500));
        if (step.reply) reply = step.reply;
      }
    } catch (err) {
      throw toHandlerError(agentName, err);
    }
    if (!reply) throw new HandlerError('a2a_error', `A2A agent "${agentName}" gave no answer`);
    return resultOf(agentName, reply);
  }
  return {
    name: `a2a-${agentName}`,
    description: `A2A bridge to "${plainLabel(agent.card.name)}" at ${url}`,
    handle: (ctx) => (ctx.stream ? streamed(ctx) : blocking(ctx)),
  };
}
