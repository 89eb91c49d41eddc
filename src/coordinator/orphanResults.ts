/**
 * Results for tasks that no running coordinator follows: announced by a coordinator that stopped
 * (killed, restarted) while its worker went on. The task's last state is in KV; while it is still
 * open, the stored result is its ending. The terminal state is written with the entry's revision, so
 * when two coordinators adopt the same task only one ending is written and published.
 */
import type { KV } from '@nats-io/kv';
import { carryResultSignature } from '../identity/eventSignature.js';
import { createEvent, type AmfEventOf, type EventSender } from '../events/cloudEvent.js';
import { replySubject } from '../events/subjects.js';
import { isTerminal, type TaskState } from '../events/taskStateMachine.js';
import type { EventBus } from '../fabric/eventBus.js';
import { kvKey } from '../fabric/jetstream.js';
import type { LogFn } from '../log.js';
import type { TaskSnapshot } from './sharedState.js';

export interface OrphanResultDeps {
  tasks: KV;
  bus: EventBus;
  sender: EventSender;
  log: LogFn;
  now?: () => number;
}

const encoder = new TextEncoder();

/** Ends an orphaned open task with `event` (its worker's stored final); anything else is left alone. */
export async function adoptOrphanResult(
  event: AmfEventOf<'amf.result.final'>,
  deps: OrphanResultDeps,
): Promise<'adopted' | 'ended' | 'unknown' | 'lost_race'> {
  const p = event.data.payload;
  const key = kvKey(p.task_id);
  const entry = await deps.tasks.get(key);
  if (!entry || entry.operation !== 'PUT') {
    deps.log('info', 'result for a task no coordinator state knows (yet)', {
      task_id: p.task_id,
      agent_id: p.agent_id,
    });
    return 'unknown';
  }
  const snap = entry.json<TaskSnapshot>();
  if (isTerminal(snap.state as TaskState) || (snap.claimed_by && snap.claimed_by !== p.agent_id)) {
    deps.log('warn', 'late result for an orphaned task refused', {
      task_id: p.task_id,
      agent_id: p.agent_id,
      state: snap.state,
    });
    return 'ended';
  }
  const completed = p.status === 'completed';
  const ended: TaskSnapshot = {
    ...snap,
    state: completed ? 'completed' : 'failed',
    claimed_by: p.agent_id,
    ended_at: new Date((deps.now ?? Date.now)()).toISOString(),
    outcome: {
      reason: completed ? 'completed' : (p.error?.code ?? 'worker_error'),
      message: 'ended by a coordinator that adopted the task after its own coordinator stopped',
    },
  };
  try {
    await deps.tasks.update(key, encoder.encode(JSON.stringify(ended)), entry.revision);
  } catch {
    return 'lost_race'; // another coordinator wrote the ending first
  }
  deps.bus.publish(
    carryResultSignature(
      event,
      createEvent({
        type: 'amf.result.final',
        sender: deps.sender,
        payload: p,
        taskId: p.task_id,
        traceId: snap.trace_id,
        ...(event.amfconfidence !== undefined ? { confidence: Number(event.amfconfidence) } : {}),
      }),
    ),
    'amf.result.final',
    replySubject(p.task_id),
  );
  deps.log('info', 'orphaned task adopted and ended with its stored result', { task_id: p.task_id });
  return 'adopted';
}
