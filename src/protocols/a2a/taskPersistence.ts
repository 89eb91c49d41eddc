/**
 * Keeps the A2A task store current for a task's whole life. The SDK persists a task's events only
 * while the request that started it listens: a stream ends at input-required (A2A 1.0) and a
 * client may leave, yet the mesh task goes on and GetTask must show its end.
 *
 * A `SendMessage` (blocking or not) is listened to by the SDK itself (or by the light path, which
 * does the same: lightSendMessage.ts) until its event queue stops (a Message, a terminal state or
 * input-required), whether or not the client stays. Until then
 * the SDK's own save of each event is enough, so this one follows the events without saving them
 * (issue 14: each save is a deep copy of the task; two managers saved every event twice) and saves
 * from the event that stopped the SDK's queue on. It keeps its own complete view of the task all
 * along, so its first save cannot put back an older state than the SDK's.
 */
import type { Message } from '@a2a-js/sdk';
import {
  ResultManager,
  type AgentExecutionEvent,
  type ExecutionEventBus,
  type ServerCallContext,
  type TaskStore,
} from '@a2a-js/sdk/server';
import { TaskState } from '@a2a-js/sdk';
import { isTerminalTaskState } from './messageParts.js';

/** True when the SDK's event queue stops after `event` (execution_event_queue.ts of the SDK). */
export function stopsSdkQueue(event: AgentExecutionEvent): boolean {
  if (event.kind === 'message') return true;
  if (event.kind !== 'statusUpdate') return false;
  const state = event.data.status?.state;
  return isTerminalTaskState(state) || state === TaskState.TASK_STATE_INPUT_REQUIRED;
}

/**
 * Applies every event of `bus` to `store`, in order. With `sdkPersistsUntilStop` (the task was
 * started by SendMessage, not by a stream), saving starts with the event that stops the SDK's queue.
 */
export function persistTaskEvents(
  bus: ExecutionEventBus,
  store: TaskStore,
  context: ServerCallContext,
  userMessage: Message,
  options: { sdkPersistsUntilStop?: boolean } = {},
): void {
  let sdkSaves = options.sdkPersistsUntilStop === true;
  const target: TaskStore = {
    load: (taskId, ctx) => store.load(taskId, ctx),
    save: (task, ctx) => (sdkSaves ? Promise.resolve() : store.save(task, ctx)),
    list: (params, ctx) => store.list(params, ctx),
  };
  // Made at the first event: a task answered without events (lightSendMessage.ts) needs none.
  let manager: ResultManager | undefined;
  let chain = Promise.resolve();
  const onEvent = (event: AgentExecutionEvent): void => {
    if (!manager) {
      manager = new ResultManager(target, context);
      manager.setContext(userMessage);
    }
    const results = manager;
    // The stopping event is saved here too: the SDK has stopped listening by the next one.
    if (sdkSaves && stopsSdkQueue(event)) chain = chain.then(() => void (sdkSaves = false));
    chain = chain.then(() => results.processEvent(event)).catch(() => undefined);
  };
  bus.on('event', onEvent);
  bus.once('finished', () => bus.off('event', onEvent));
}
