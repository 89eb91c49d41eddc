/**
 * Follow-up input for a running mesh task: the requester answered the claimant's `amf.task.blocked`
 * (A2A: a message carrying the task's id while it is input-required). The coordinator hands it to
 * the worker holding the task as `amf.task.input` naming that worker; the worker's waiting handler
 * goes on, and its new claim moves the task from blocked back to claimed.
 */
import { createEvent, type EventSender } from '../events/cloudEvent.js';
import type { InputPayload } from '../events/payloads.js';
import type { EventBus } from '../fabric/eventBus.js';
import { AmfError } from '../errors.js';
import type { TaskLifecycle } from './taskLifecycle.js';

export interface TaskInputDeps {
  bus: EventBus;
  sender: EventSender;
  lifecycle: Pick<TaskLifecycle, 'get'>;
}

/** What the requester sent. */
export interface TaskInputMessage {
  text: string;
  data?: Record<string, unknown>;
  messageId?: string;
}

/**
 * Sends `message` to the worker holding `taskId`. Throws INVALID_REQUEST when the task is not
 * running with a claimant (unknown, ended, or not yet claimed).
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
  const payload: InputPayload = {
    task_id: taskId,
    agent_id: task.claimedBy,
    text: message.text,
    ...(message.data ? { data: message.data } : {}),
    ...(message.messageId ? { message_id: message.messageId } : {}),
  };
  deps.bus.publish(
    createEvent({ type: 'amf.task.input', sender: deps.sender, payload, taskId, traceId: task.traceId }),
  );
}
