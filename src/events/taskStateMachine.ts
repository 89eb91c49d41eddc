/**
 * The task state machine of notes/amf.md section 4. Pure: it says which state an event moves a task
 * to, or why the transition is invalid. The coordinator's lifecycle applies it and emits
 * `amf.policy.warning` for rejected transitions.
 */

export type TaskState = 'announced' | 'claimed' | 'blocked' | 'completed' | 'failed' | 'expired';

export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set(['completed', 'failed', 'expired']);

/** What can happen to a task: fabric events plus the coordinator's own decisions. */
export type TaskTransition =
  | 'amf.task.claim'
  | 'amf.task.progress'
  | 'amf.task.blocked'
  | 'amf.task.delegate'
  | 'amf.result.partial'
  | 'amf.result.final'
  | 'amf.policy.deny'
  /** No claim within the TTL and no retries left. */
  | 'expire'
  /** TTL retry or watchdog re-announcement of the same task. */
  | 'reannounce'
  /** Worker error, watchdog give-up, cancellation. */
  | 'fail';

export type TransitionResult = { ok: true; state: TaskState } | { ok: false; reason: string };

/** True for completed, failed and expired. */
export function isTerminal(state: TaskState): boolean {
  return TERMINAL_STATES.has(state);
}

/** Applies `transition` to a task in `from`; never throws. */
export function nextTaskState(from: TaskState, transition: TaskTransition): TransitionResult {
  if (isTerminal(from)) return { ok: false, reason: `task is already ${from}` };
  switch (transition) {
    case 'amf.task.claim':
      return from === 'announced' || from === 'blocked'
        ? { ok: true, state: 'claimed' }
        : { ok: false, reason: `cannot claim a task that is ${from}` };
    case 'amf.task.progress':
    case 'amf.result.partial':
    case 'amf.task.delegate':
      return from === 'claimed'
        ? { ok: true, state: 'claimed' }
        : { ok: false, reason: `${transition} requires a claimed task, task is ${from}` };
    case 'amf.task.blocked':
      return from === 'claimed'
        ? { ok: true, state: 'blocked' }
        : { ok: false, reason: `cannot block a task that is ${from}` };
    case 'amf.result.final':
      return from === 'claimed'
        ? { ok: true, state: 'completed' }
        : { ok: false, reason: `a final result requires a claimed task, task is ${from}` };
    case 'expire':
      return from === 'announced'
        ? { ok: true, state: 'expired' }
        : { ok: false, reason: `only an unclaimed task expires, task is ${from}` };
    case 'reannounce':
      return { ok: true, state: 'announced' };
    case 'amf.policy.deny':
    case 'fail':
      return { ok: true, state: 'failed' };
    default: {
      const unreachable: never = transition;
      return { ok: false, reason: `unknown transition ${String(unreachable)}` };
    }
  }
}
