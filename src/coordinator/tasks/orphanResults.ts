/**
 * Results for tasks that no running coordinator follows: announced by a coordinator that stopped
 * (killed, restarted) while its worker went on. The task's last state is in KV; while it is still
 * open, the stored result is its ending. The terminal state is written with the entry's revision, so
 * when two coordinators adopt the same task only one ending is written and published.
 *
 * Whose result may end it: the worker the state names as holder; any agent admitted for the task's
 * tag while nobody holds it; and, once the holder is lost (not live), an agent admitted for the tag
 * that ran the task's redelivered work item — the case of a coordinator and its task's worker dying
 * together (e.g. `amf up --demo`, whose demo workers share its process), where the work queue hands
 * the unacknowledged item to another worker after the ack wait.
 */
import type { KV } from '@nats-io/kv';
import { carryResultSignature } from '../../identity/eventSignature.js';
import { createEvent, type AmfEventOf, type EventSender } from '../../events/cloudEvent.js';
import { RECORD_AGAIN_WITHIN_MS, replySubject, terminalEventMsgId } from '../../events/subjects.js';
import { isTerminal, type TaskState } from '../../events/taskStateMachine.js';
import { UNTIL_CLOSED, type EventBus } from '../../fabric/eventBus.js';
import { kvKey } from '../../fabric/jetstream.js';
import type { LogFn } from '../../log.js';
import type { AgentRegistry } from '../../registry/agentRegistry.js';
import type { TaskSnapshot } from '../sharedState.js';
import { jsonBytes } from '../../util/jsonBytes.js';

export interface OrphanResultDeps {
  tasks: KV;
  bus: EventBus;
  sender: EventSender;
  log: LogFn;
  /** The registry's view of the agents (shared through KV, so it knows agents admitted elsewhere). */
  agents: Pick<AgentRegistry, 'get'>;
  now?: () => number;
}

/** Admitted for `tag` at some point and not refused since (live, or offline after it was live). */
function admittedForTag(agents: OrphanResultDeps['agents'], agentId: string, tag: string): boolean {
  const agent = agents.get(agentId);
  return (
    (agent?.status === 'live' || agent?.status === 'offline') &&
    (agent.record.capability_tags ?? []).includes(tag)
  );
}

const ADOPTED_MESSAGE = 'ended by a coordinator that adopted the task after its own coordinator stopped';

/**
 * Publishes the canonical final of an adopted task and waits until AMF_EVENTS holds it (the stored
 * result is acknowledged after this). Its message id is the task's terminal one, so the record of
 * a coordinator that died after storing it but before acknowledging is not stored twice.
 */
async function recordFinal(
  event: AmfEventOf<'amf.result.final'>,
  snap: TaskSnapshot,
  deps: OrphanResultDeps,
): Promise<'stored' | 'too_large' | 'gave_up'> {
  const p = event.data.payload;
  const final = carryResultSignature(
    event,
    createEvent({
      type: 'amf.result.final',
      sender: deps.sender,
      payload: p,
      taskId: p.task_id,
      traceId: snap.trace_id,
      ...(event.amfconfidence !== undefined ? { confidence: Number(event.amfconfidence) } : {}),
    }),
  );
  deps.bus.publish(final, replySubject(p.task_id));
  // Retried for as long as this coordinator runs (a full disk, a stream without its leader).
  const outcome = await deps.bus.publishDurable(final, 'amf.result.final', {
    msgId: terminalEventMsgId(p.task_id),
    giveUpMs: UNTIL_CLOSED,
  });
  if (outcome !== 'stored')
    deps.log(
      'error',
      `the ending of task ${p.task_id} was not recorded (${outcome}); its result stays stored`,
      {
        task_id: p.task_id,
      },
    );
  return outcome;
}

/** Ends an orphaned open task with `event` (its worker's stored final); anything else is left alone. */
export async function adoptOrphanResult(
  event: AmfEventOf<'amf.result.final'>,
  deps: OrphanResultDeps,
): Promise<'adopted' | 'ended' | 'unknown' | 'lost_race' | 'not_recorded'> {
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
  const refuse = (why: string) => {
    deps.log('warn', `result for an orphaned task refused: ${why}`, {
      task_id: p.task_id,
      agent_id: p.agent_id,
      state: snap.state,
      ...(snap.claimed_by ? { claimed_by: snap.claimed_by } : {}),
    });
    return 'ended' as const;
  };
  if (isTerminal(snap.state as TaskState)) {
    // Ended with this very result (its holder's, the same outcome) by a coordinator that died before
    // its record was stored: it writes KV first, then the record, and tells the worker `accepted`
    // only once the record is stored, so the worker stored the result itself. That holds for the
    // task's own coordinator as for an adopter. Record it again: within the stream's duplicate
    // window the task's terminal message id makes this a no-op if it was stored. Only inside that
    // window: later, the claimant (or anyone holding its key) could otherwise store a result again
    // and have a second, different ending recorded for a task long over.
    const endedAt = Date.parse(snap.ended_at ?? '');
    const recent = (deps.now ?? Date.now)() - endedAt < RECORD_AGAIN_WITHIN_MS;
    const sameEnding = snap.claimed_by === p.agent_id && snap.state === p.status;
    if (sameEnding && recent)
      return (await recordFinal(event, snap, deps)) === 'stored' ? 'ended' : 'not_recorded';
    return refuse('the task has ended');
  }
  const holder = snap.claimed_by;
  if (holder !== p.agent_id) {
    if (!admittedForTag(deps.agents, p.agent_id, snap.tag))
      return refuse(`the agent is not admitted for tag ${snap.tag}`);
    // A live holder is still running the task and will store its own result; this one is a
    // duplicate. Offered again a few times (the holder may be dead and not yet seen offline).
    if (holder && deps.agents.get(holder)?.status === 'live') {
      deps.log('info', 'result for an orphaned task held by another live worker: offered again later', {
        task_id: p.task_id,
        agent_id: p.agent_id,
        claimed_by: holder,
      });
      return 'unknown';
    }
  }
  const completed = p.status === 'completed';
  const ended: TaskSnapshot = {
    ...snap,
    state: completed ? 'completed' : 'failed',
    claimed_by: p.agent_id,
    ended_at: new Date((deps.now ?? Date.now)()).toISOString(),
    outcome: {
      reason: completed ? 'completed' : (p.error?.code ?? 'worker_error'),
      message: ADOPTED_MESSAGE,
    },
  };
  try {
    await deps.tasks.update(key, jsonBytes(ended), entry.revision);
  } catch {
    return 'lost_race'; // another coordinator wrote the ending first
  }
  if ((await recordFinal(event, snap, deps)) !== 'stored') return 'not_recorded';
  deps.log('info', 'orphaned task adopted and ended with its stored result', {
    task_id: p.task_id,
    agent_id: p.agent_id,
    ...(holder && holder !== p.agent_id ? { lost_holder: holder } : {}),
  });
  return 'adopted';
}
