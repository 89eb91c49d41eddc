/**
 * Agents' output about tasks this coordinator does not follow. Every worker publishes its claim and
 * final on the shared canonical subjects, also for a task it was given directly (`POST /tasks/send`,
 * its own A2A or MCP endpoint) and for tasks of another mesh on the same NATS; the lifecycle ignores
 * such events (no task record to change). Checking them first would cost a JSON-schema validation
 * and an Ed25519 verification each — the largest cost of a direct task in the coordinator's process
 * — for nothing, so they are dropped before either. An event for a task the coordinator does know
 * (in flight or recently ended) is validated and its signature checked as before.
 */

/** Event types whose payload names the task they are about and that the coordinator authenticates. */
const TASK_OUTPUT_TYPES: ReadonlySet<string> = new Set([
  'amf.task.claim',
  'amf.task.progress',
  'amf.result.partial',
  'amf.task.blocked',
  'amf.task.delegate',
  'amf.result.final',
]);

/** True for agents' output about a task: it counts only once shown to come from the agent it names. */
export function isTaskOutput(event: { type: string }): boolean {
  return TASK_OUTPUT_TYPES.has(event.type);
}

/**
 * The task an agent's output is about, read from the unvalidated message as the lifecycle reads it
 * (a delegation is progress of its parent task); undefined when the message is not such output or
 * names no task.
 */
export function outputTaskId(parsed: unknown): string | undefined {
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { type, data } = parsed as { type?: unknown; data?: unknown };
  if (typeof type !== 'string' || !TASK_OUTPUT_TYPES.has(type)) return undefined;
  if (typeof data !== 'object' || data === null) return undefined;
  const payload = (data as { payload?: unknown }).payload;
  if (typeof payload !== 'object' || payload === null) return undefined;
  const p = payload as { task_id?: unknown; parent_task_id?: unknown };
  if (type === 'amf.task.delegate' && typeof p.parent_task_id === 'string') return p.parent_task_id;
  return typeof p.task_id === 'string' ? p.task_id : undefined;
}

/**
 * True when `parsed` is an agent's output about a task `knows` does not know: the lifecycle would
 * ignore it, so it need not be validated or authenticated. Anything else (other event types,
 * malformed messages) goes on to validation, which reports what is wrong.
 */
export function isOutputOfUntrackedTask(parsed: unknown, knows: (taskId: string) => boolean): boolean {
  const taskId = outputTaskId(parsed);
  return taskId !== undefined && !knows(taskId);
}
