/**
 * Where agents' task events enter the mesh. An agent with its own NATS user may not publish claims,
 * progress, blocked notices, delegations, partials or finals on the shared subjects (`amf.task.*`,
 * `amf.result.*`, the reply subjects), which AMF_EVENTS records and requesters read as they arrive:
 * it hands each one to the coordinators on its own subject `amf.internal.task.<nkey>.<route>`
 * (agentUsers.ts), which nats-server lets only that key's user publish on. So the subject names the
 * real sender, and a coordinator decides before anything is recorded:
 *
 * - size: no larger than `task_events.max_event_bytes`;
 * - quota: within the agent's events and bytes per minute (`task_events.agent_*_per_minute`), counted
 *   before the event is parsed, so a flood beyond the quota costs a map lookup per message;
 * - provenance: the event is one of the task event types, valid, and speaks for the agent bound to
 *   the key (its `auth_context.identity` and payload `agent_id`), not as a coordinator.
 *
 * What passes is recorded unchanged on the shared subject (`/events`, the history, the console and
 * seed subscribers see it as before); output for a coordinator's task goes to its requester, which
 * waits in that coordinator (what the reply subject carried). Since the subject proves the sender,
 * the lifecycle takes it without an Ed25519 check of the signature the worker put on it
 * (EventAuthenticity.vouch; the bound key and freshness are still checked there); a forgery in
 * another agent's name is refused here and warned naming the connection's agent.
 *
 * Routes: `mesh` events (a task a coordinator announced) reach every coordinator and are recorded by
 * the task's own one, which also hands them to its lifecycle and its requester at once, in their
 * arrival order with the worker's direct final (resultIntake.ts); its lifecycle drops the echo. `direct` events (a task
 * a caller sent straight to the agent, delegations) go to one coordinator of a queue group, which
 * records them; one about a task it announced (the same id) goes to its lifecycle at once too.
 */
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type { AnyAmfEvent } from '../../events/cloudEvent.js';
import type { AmfEventType } from '../../events/eventTypes.js';
import { isTaskId } from '../../events/subjects.js';
import { validateEvent } from '../../events/validateEvent.js';
import { isAgentNkey, TASK_EVENT_PREFIX, type TaskEventRoute } from '../../fabric/agentUsers.js';
import type { EventBus } from '../../fabric/eventBus.js';
import type { AgentRegistry } from '../../registry/agentRegistry.js';
import type { PolicyNotices } from '../../registry/policyNotices.js';
import { BoundedCache } from '../../util/boundedCache.js';
import { RateQuota } from '../../util/rateQuota.js';

/** What the intake enforces (config `task_events.*`). */
export interface TaskEventLimits {
  maxEventBytes: number;
  agentBytesPerMinute: number;
  agentEventsPerMinute: number;
}

export interface TaskEventIntakeOptions {
  nc: NatsConnection;
  /** The coordinator's bus: what its lifecycle was handed is published as its own (no echo). */
  bus: EventBus;
  registry: Pick<AgentRegistry, 'list'>;
  notices: PolicyNotices;
  limits: TaskEventLimits;
  /** True when this coordinator announced the task and still follows it: it records its events. */
  ownsTask: (taskId: string) => boolean;
  /** Hands a recorded event of an owned task to this coordinator's lifecycle. */
  take: (event: AnyAmfEvent) => void;
  /** Hands worker output of an owned task to its requester waiting here (the reply subject's reader). */
  takeReply: (event: AnyAmfEvent, taskId: string) => void;
  /** Tells the authenticity check that the subject proves this event's sender (EventAuthenticity.vouch). */
  vouch?: (event: AnyAmfEvent, nkey: string) => void;
  now?: () => number;
}

/** Why an event was refused (the warning's `reason`). */
export type TaskEventRefusal =
  'event_too_large' | 'quota_exceeded' | 'invalid_event' | 'unknown_agent' | 'forged_event';

/** The queue group of the coordinators' intake of direct tasks' events: each is recorded once. */
export const TASK_EVENT_INTAKE_QUEUE = 'coordinators-task-events';

/** Worker output that also goes to a coordinator's task's reply subject (its requester reads it). */
const REPLY_TYPES: ReadonlySet<string> = new Set([
  'amf.task.claim',
  'amf.task.progress',
  'amf.task.blocked',
  'amf.result.partial',
]);
/** What an agent may hand in on each route. */
const TYPES_OF: Readonly<Record<TaskEventRoute, ReadonlySet<string>>> = {
  mesh: REPLY_TYPES,
  direct: new Set([...REPLY_TYPES, 'amf.task.delegate', 'amf.result.final']),
};

/** Identical refusals are warned once per window; a quota once per agent per minute. */
const WARNING_WINDOW_MS = 10_000;
const QUOTA_WARNING_WINDOW_MS = 60_000;
/** How long a key's agent is remembered between registry scans. */
const AGENT_LOOKUP_TTL_MS = 1_000;

/** Counts of what the intake did, since start. */
export interface TaskEventCounts {
  recorded: number;
  /** Mesh events of tasks this coordinator does not own (their own coordinator records them). */
  notOwned: number;
  refused: Readonly<Record<string, number>>;
}

export class TaskEventIntake {
  private readonly subs: Subscription[] = [];
  private readonly quota: RateQuota;
  private readonly warned: BoundedCache<true>;
  private readonly quotaWarned: BoundedCache<true>;
  private readonly agents: BoundedCache<string>;
  private recorded = 0;
  private notOwned = 0;
  private readonly refusals = new Map<TaskEventRefusal, number>();

  constructor(private readonly options: TaskEventIntakeOptions) {
    const now = options.now ?? Date.now;
    this.quota = new RateQuota({
      eventsPerMinute: options.limits.agentEventsPerMinute,
      bytesPerMinute: options.limits.agentBytesPerMinute,
      now,
    });
    this.warned = new BoundedCache(10_000, WARNING_WINDOW_MS, now);
    this.quotaWarned = new BoundedCache(10_000, QUOTA_WARNING_WINDOW_MS, now);
    this.agents = new BoundedCache(10_000, AGENT_LOOKUP_TTL_MS, now);
  }

  /** Subscribes to every agent's task-event subjects. */
  start(): void {
    if (this.subs.length > 0) return;
    const { nc } = this.options;
    this.subs.push(
      nc.subscribe(`${TASK_EVENT_PREFIX}*.mesh`, {
        callback: (err, msg) => {
          if (!err) this.onEvent('mesh', msg);
        },
      }),
      nc.subscribe(`${TASK_EVENT_PREFIX}*.direct`, {
        queue: TASK_EVENT_INTAKE_QUEUE,
        callback: (err, msg) => {
          if (!err) this.onEvent('direct', msg);
        },
      }),
    );
  }

  /** Stops taking events. */
  close(): void {
    for (const sub of this.subs.splice(0)) sub.unsubscribe();
  }

  /** What the intake enforces. */
  get limits(): Readonly<TaskEventLimits> {
    return this.options.limits;
  }

  get counts(): TaskEventCounts {
    return {
      recorded: this.recorded,
      notOwned: this.notOwned,
      refused: Object.fromEntries(this.refusals),
    };
  }

  /**
   * Holds `nkey`'s agent to its quota for `bytes` more (the stored results of resultIntake.ts count
   * against the same one): true when within it; otherwise the refusal is counted and warned.
   */
  admit(nkey: string, bytes: number, what: string): boolean {
    const { limits } = this.options;
    if (bytes > limits.maxEventBytes) {
      this.refuse(
        'event_too_large',
        nkey,
        what,
        () =>
          `${what} of ${bytes} bytes refused: at most ${limits.maxEventBytes} bytes (task_events.max_event_bytes)`,
      );
      return false;
    }
    if (this.quota.take(nkey, bytes)) return true;
    this.refuse(
      'quota_exceeded',
      nkey,
      'task events',
      (sender) =>
        `${sender} sent more task events and stored results than its quota of ${limits.agentEventsPerMinute} events and ${limits.agentBytesPerMinute} bytes a minute (task_events.agent_events_per_minute, task_events.agent_bytes_per_minute): the rest is refused until it slows down`,
    );
    return false;
  }

  /** The agent bound to `nkey`, if one is listed with it (only its own user sends on its subjects). */
  agentWithKey(nkey: string): string | undefined {
    const cached = this.agents.get(nkey);
    if (cached !== undefined) return cached;
    const found = this.options.registry.list().find((a) => a.record.nkey === nkey)?.record.agent_id;
    // Only a found agent is remembered: one admitted a moment ago is found on its first event.
    if (found !== undefined) this.agents.set(nkey, found);
    return found;
  }

  /**
   * Refuses, and warns, an event that speaks for another agent than the one bound to its sender's
   * key (or as a coordinator): true when refused.
   */
  refuseForgery(nkey: string, agentId: string, event: AnyAmfEvent, intake: string): boolean {
    const identity = event.data.auth_context.identity;
    const payloadAgent = (event.data.payload as { agent_id?: unknown }).agent_id;
    const claimed = typeof payloadAgent === 'string' && payloadAgent !== agentId ? payloadAgent : identity;
    if (claimed === agentId && event.amfagentrole !== 'coordinator') return false;
    this.refuse(
      'forged_event',
      nkey,
      event.type,
      () =>
        `${event.type} refused: sent by ${agentId} (its own NATS connection, ${intake}) in the name of ${claimed}${event.amfagentrole === 'coordinator' ? ' as a coordinator' : ''}; an agent publishes only as itself`,
      claimed,
      // Warned apart: each intake, and a coordinator's role, is another attempt worth naming.
      `${intake}|${event.amfagentrole}`,
      taskOf(event),
    );
    return true;
  }

  private onEvent(route: TaskEventRoute, msg: Msg): void {
    const rest = msg.subject.slice(TASK_EVENT_PREFIX.length);
    const nkey = rest.slice(0, rest.indexOf('.'));
    // Only the coordinators' own users could publish a subject that names no key.
    if (!isAgentNkey(nkey)) return;
    // Size and quota come first and need no parsing: a flood beyond them costs a map access each.
    if (!this.admit(nkey, msg.data.length, 'a task event')) return;
    const agentId = this.agentWithKey(nkey);
    if (agentId === undefined)
      return this.refuse(
        'unknown_agent',
        nkey,
        'task events',
        () => `task event refused: no agent is admitted with key ${nkey}`,
      );
    let parsed: unknown;
    try {
      parsed = msg.json();
    } catch {
      return this.refuse('invalid_event', nkey, 'task events', () => 'task event refused: not JSON');
    }
    const valid = validateEvent(parsed);
    if (!valid.ok)
      return this.refuse(
        'invalid_event',
        nkey,
        'task events',
        () => `task event refused: ${valid.errors.slice(0, 5).join('; ')}`,
      );
    const event = valid.value;
    if (!TYPES_OF[route].has(event.type))
      return this.refuse(
        'invalid_event',
        nkey,
        event.type,
        () =>
          `a ${event.type} event on the ${route} task-event subject: only ${[...TYPES_OF[route]].join(', ')}`,
      );
    if (this.refuseForgery(nkey, agentId, event, 'task events')) return;
    const taskId = (event.data.payload as { task_id?: unknown }).task_id;
    // Kept apart from the receive buffer: an echo waited for must not hold the whole read slab.
    const bytes = msg.data.slice();
    const owned = isTaskId(taskId) && this.options.ownsTask(taskId);
    if (!owned) {
      if (route === 'mesh') this.notOwned += 1;
      else {
        this.recorded += 1;
        this.options.nc.publish(event.type, bytes);
      }
      return;
    }
    this.recorded += 1;
    // Its sender is proven by the subject and checked above: no signature check needed after this.
    this.options.vouch?.(event, nkey);
    // The lifecycle first, in the order the worker sent its events (both routes and its direct
    // final): a task of this coordinator's is judged on what arrived here, not on what came back.
    this.options.take(event);
    // Its requester is this coordinator's: handed over here, not sent round on the reply subject.
    if (route === 'mesh') this.options.takeReply(event, taskId);
    this.options.bus.publishOwnBytes(event.type, bytes);
  }

  /**
   * Counts a refusal and warns it, naming the agent whose connection sent it, unless the same
   * refusal was warned within its window; the message is built only for a warning that goes out.
   */
  private refuse(
    reason: TaskEventRefusal,
    nkey: string,
    what: AmfEventType | string,
    message: (sender: string) => string,
    claimed?: string,
    scope = '',
    taskId?: string,
  ): void {
    this.refusals.set(reason, (this.refusals.get(reason) ?? 0) + 1);
    const seen = reason === 'quota_exceeded' ? this.quotaWarned : this.warned;
    // Not per task: a flood of forgeries naming ever new tasks is still one warning a window.
    const key = `${reason}|${nkey}|${claimed ?? ''}|${what}|${scope}`;
    if (seen.get(key) !== undefined) return;
    seen.set(key, true);
    const sender = this.agentWithKey(nkey) ?? `key ${nkey}`;
    this.options.notices.warn({
      reason,
      message: message(sender),
      agent_id: sender.slice(0, 256),
      ...(taskId !== undefined ? { task_id: taskId } : {}),
      details: {
        intake: 'task event intake',
        event_type: what,
        nats_user: nkey,
        ...(claimed !== undefined ? { claimed_agent: claimed.slice(0, 256) } : {}),
      },
    });
  }
}

/** The task an event is about (its payload's `task_id`), when it names a valid one. */
function taskOf(event: AnyAmfEvent): string | undefined {
  const taskId = (event.data.payload as { task_id?: unknown }).task_id;
  return isTaskId(taskId) ? taskId : undefined;
}
