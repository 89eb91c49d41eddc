/**
 * Follow-up input for a running mesh task: the requester answered the claimant's `amf.task.blocked`
 * (A2A: a message carrying the task's id while it is input-required). The coordinator hands it to
 * the worker holding the task as `amf.task.input` naming that worker; the worker's waiting handler
 * goes on, and its new claim moves the task from blocked back to claimed.
 *
 * The follow-up may carry what the requester tells only the worker ("my PIN is …"), so it travels on
 * the holder's own subject (`amf.agent.<nkey>.input`, agentUsers.ts), which nats-server lets no
 * other agent read; never on a subject every agent may read.
 */
import { createEvent, type EventSender } from '../../events/cloudEvent.js';
import type { InputPayload } from '../../events/payloads.js';
import type { EventBus } from '../../fabric/eventBus.js';
import { agentInputSubject, isAgentNkey } from '../../fabric/agentUsers.js';
import { AmfError } from '../../errors.js';
import type { AgentRegistry } from '../../registry/agentRegistry.js';
import type { TaskLifecycle } from './lifecycle.js';

export interface TaskInputDeps {
  bus: EventBus;
  sender: EventSender;
  lifecycle: Pick<TaskLifecycle, 'get'>;
  /** The key the holder is bound to names its subject. */
  registry: Pick<AgentRegistry, 'boundKey'>;
}

/** What the requester sent. */
export interface TaskInputMessage {
  text: string;
  data?: Record<string, unknown>;
  messageId?: string;
}

/**
 * Sends `message` to the worker holding `taskId`, on that worker's own subject. Throws
 * INVALID_REQUEST when the task is not running with a claimant (unknown, ended, or not yet claimed),
 * or when its claimant has no key to name a private subject by (a seed-style worker, which takes no
 * follow-ups).
 */
export function sendTaskInput(deps: TaskInputDeps, taskId: string, message: TaskInputMessage): void {
  const task = deps.lifecycle.get(taskId);
  // Claimed as well as blocked: the blocked notice may reach the requester (reply subject) before
  // the lifecycle (canonical subject); the worker takes input only while its handler waits for it.
  if (!task || (task.state !== 'blocked' && task.state !== 'claimed') || !task.claimedBy)
    throw new AmfError(
      'INVALID_REQUEST',
      `task ${taskId} is not waiting for input (${task ? task.state : 'unknown task'})`,
    );
  const key = deps.registry.boundKey(task.claimedBy);
  if (!isAgentNkey(key))
    throw new AmfError(
      'INVALID_REQUEST',
      `task ${taskId} is held by ${task.claimedBy}, which has no key: follow-ups go only to an agent's own subject`,
    );
  const payload: InputPayload = {
    task_id: taskId,
    agent_id: task.claimedBy,
    text: message.text,
    ...(message.data ? { data: message.data } : {}),
    ...(message.messageId ? { message_id: message.messageId } : {}),
  };
  deps.bus.publish(
    createEvent({ type: 'amf.task.input', sender: deps.sender, payload, taskId, traceId: task.traceId }),
    agentInputSubject(key),
  );
}
