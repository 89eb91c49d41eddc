/**
 * Where agents' artifacts and evidence enter the mesh. An admitted agent may not publish them on the
 * seed's subjects (`amf.artifact.publish`, `amf.evidence.publish`) itself: it hands each one to the
 * coordinators on its own submission subject (`amf.internal.artifact.<nkey>`, agentUsers.ts), which
 * nats-server lets only that key's user publish on. The coordinator that takes it (one per message:
 * a queue group) then decides:
 *
 * - size: no larger than `artifacts.max_event_bytes`;
 * - quota: within the agent's events and bytes per minute (`artifacts.agent_*_per_minute`), counted
 *   before the event is even parsed, so a flood beyond the quota costs a map lookup per message;
 * - provenance: the event speaks for the agent that sent it (its `auth_context.identity` and any
 *   payload `agent_id` are that agent's id, its role is not the coordinator's), and a signature, if
 *   there is one, is that agent's key's;
 *
 * and publishes the same bytes on the seed's subject, where AMF_ARTIFACTS keeps them and `/events`
 * shows them. Anything else is refused and warned (`amf.policy.warning`) naming the agent whose
 * connection sent it, never the one it claims to be; identical warnings once per window.
 */
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type { AmfEventType } from '../events/eventTypes.js';
import { validateEvent } from '../events/validateEvent.js';
import { isAgentNkey, SUBMISSION_PREFIXES, type SubmissionKind } from '../fabric/agentUsers.js';
import { checkEventSignature } from '../identity/eventSignature.js';
import type { AgentRegistry } from '../registry/agentRegistry.js';
import type { PolicyNotices } from '../registry/policyNotices.js';
import { BoundedCache } from '../util/boundedCache.js';
import { RateQuota } from '../util/rateQuota.js';

/** What the intake enforces (config `artifacts.*`). */
export interface ArtifactLimits {
  maxEventBytes: number;
  agentBytesPerMinute: number;
  agentEventsPerMinute: number;
}

export interface ArtifactIntakeOptions {
  nc: NatsConnection;
  registry: Pick<AgentRegistry, 'list'>;
  notices: PolicyNotices;
  limits: ArtifactLimits;
  now?: () => number;
}

/** Why a submission was refused (the warning's `reason`). */
export type ArtifactRefusal =
  | 'artifact_too_large'
  | 'quota_exceeded'
  | 'invalid_event'
  | 'unknown_agent'
  | 'forged_event'
  | 'bad_signature';

/** The queue group of the coordinators' intake: each submission is checked and published once. */
export const ARTIFACT_INTAKE_QUEUE = 'coordinators-artifacts';

const TYPE_OF: Readonly<Record<SubmissionKind, AmfEventType>> = {
  artifact: 'amf.artifact.publish',
  evidence: 'amf.evidence.publish',
};

/** Identical refusals are warned once per window; a quota once per agent per minute. */
const WARNING_WINDOW_MS = 10_000;
const QUOTA_WARNING_WINDOW_MS = 60_000;

export class ArtifactIntake {
  private readonly subs: Subscription[] = [];
  private readonly quota: RateQuota;
  private readonly warned: BoundedCache<true>;
  private readonly quotaWarned: BoundedCache<true>;
  private published = 0;
  private readonly refusals = new Map<ArtifactRefusal, number>();

  constructor(private readonly options: ArtifactIntakeOptions) {
    const now = options.now ?? Date.now;
    this.quota = new RateQuota({
      eventsPerMinute: options.limits.agentEventsPerMinute,
      bytesPerMinute: options.limits.agentBytesPerMinute,
      now,
    });
    this.warned = new BoundedCache(10_000, WARNING_WINDOW_MS, now);
    this.quotaWarned = new BoundedCache(10_000, QUOTA_WARNING_WINDOW_MS, now);
  }

  /** Subscribes to every agent's submission subjects. */
  start(): void {
    if (this.subs.length > 0) return;
    for (const kind of Object.keys(SUBMISSION_PREFIXES) as SubmissionKind[]) {
      this.subs.push(
        this.options.nc.subscribe(`${SUBMISSION_PREFIXES[kind]}*`, {
          queue: ARTIFACT_INTAKE_QUEUE,
          callback: (err, msg) => {
            if (!err) this.onSubmission(kind, msg);
          },
        }),
      );
    }
  }

  /** Stops taking submissions. */
  close(): void {
    for (const sub of this.subs.splice(0)) sub.unsubscribe();
  }

  /**
   * Holds a publisher that is not an agent (a `POST /publish` caller, named by the identity the
   * edge authenticated) to the same size cap and quota: undefined when `bytes` more may be published
   * now, else why not. A refusal is the caller's answer, not a warning.
   */
  admitOther(publisher: string, bytes: number): 'artifact_too_large' | 'quota_exceeded' | undefined {
    if (bytes > this.options.limits.maxEventBytes) return 'artifact_too_large';
    return this.quota.take(`other:${publisher}`, bytes) ? undefined : 'quota_exceeded';
  }

  /** What the intake enforces. */
  get limits(): Readonly<ArtifactLimits> {
    return this.options.limits;
  }

  /** Submissions published on the seed's subjects, and refusals by reason, since start. */
  get counts(): { published: number; refused: Readonly<Record<string, number>> } {
    return { published: this.published, refused: Object.fromEntries(this.refusals) };
  }

  private onSubmission(kind: SubmissionKind, msg: Msg): void {
    const nkey = msg.subject.slice(SUBMISSION_PREFIXES[kind].length);
    // Only the coordinators' own users could publish a subject that names no key.
    if (!isAgentNkey(nkey)) return;
    const type = TYPE_OF[kind];
    const bytes = msg.data.length;
    const { limits } = this.options;
    // Size and quota come first and need no lookup: a flood beyond them costs a map access each.
    if (bytes > limits.maxEventBytes)
      return this.refuse(
        'artifact_too_large',
        nkey,
        type,
        () =>
          `${type} of ${bytes} bytes refused: at most ${limits.maxEventBytes} bytes (artifacts.max_event_bytes); large artifacts travel by reference`,
      );
    if (!this.quota.take(nkey, bytes))
      return this.refuse(
        'quota_exceeded',
        nkey,
        type,
        (sender) =>
          `${sender} sent more artifacts and evidence than its quota of ${limits.agentEventsPerMinute} events and ${limits.agentBytesPerMinute} bytes a minute (artifacts.agent_events_per_minute, artifacts.agent_bytes_per_minute): the rest is refused until it slows down`,
      );
    const agentId = this.agentWithKey(nkey);
    if (agentId === undefined)
      return this.refuse(
        'unknown_agent',
        nkey,
        type,
        () => `${type} refused: no agent is admitted with key ${nkey}`,
      );
    let parsed: unknown;
    try {
      parsed = msg.json();
    } catch {
      return this.refuse('invalid_event', nkey, type, () => `${type} refused: not JSON`);
    }
    const valid = validateEvent(parsed);
    if (!valid.ok)
      return this.refuse(
        'invalid_event',
        nkey,
        type,
        () => `${type} refused: ${valid.errors.slice(0, 5).join('; ')}`,
      );
    const event = valid.value;
    if (event.type !== type)
      return this.refuse(
        'invalid_event',
        nkey,
        type,
        () => `a ${event.type} event on the ${kind} submission subject: only ${type} is taken there`,
      );
    const identity = event.data.auth_context.identity;
    const payloadAgent = (event.data.payload as { agent_id?: unknown }).agent_id;
    const claimed = typeof payloadAgent === 'string' && payloadAgent !== agentId ? payloadAgent : identity;
    if (claimed !== agentId || event.amfagentrole === 'coordinator')
      return this.refuse(
        'forged_event',
        nkey,
        type,
        () =>
          `${type} refused: sent by ${agentId} (its own NATS connection) in the name of ${claimed}${event.amfagentrole === 'coordinator' ? ' as a coordinator' : ''}; an agent publishes only as itself`,
        claimed,
      );
    // Unsigned is fine: the connection already binds the sender. A signature must still be its own.
    const signature = checkEventSignature(event);
    if (!signature.ok && signature.reason !== 'unsigned')
      return this.refuse(
        'bad_signature',
        nkey,
        type,
        () => `${type} refused: its signature does not verify (${signature.reason})`,
      );
    if (signature.ok && signature.signer !== nkey)
      return this.refuse(
        'forged_event',
        nkey,
        type,
        () => `${type} refused: sent by ${agentId} but signed with key ${signature.signer}, not its own`,
      );
    this.published += 1;
    this.options.nc.publish(type, msg.data);
  }

  /** The agent bound to `nkey` (only its own NATS user can publish on its submission subjects). */
  private agentWithKey(nkey: string): string | undefined {
    return this.options.registry.list().find((a) => a.record.nkey === nkey)?.record.agent_id;
  }

  /**
   * Counts a refusal and warns it, naming the agent whose connection sent it, unless the same
   * refusal was warned within its window; the message is built only for a warning that goes out.
   */
  private refuse(
    reason: ArtifactRefusal,
    nkey: string,
    type: AmfEventType,
    message: (sender: string) => string,
    claimed?: string,
  ): void {
    this.refusals.set(reason, (this.refusals.get(reason) ?? 0) + 1);
    const seen = reason === 'quota_exceeded' ? this.quotaWarned : this.warned;
    const key = `${reason}|${nkey}|${claimed ?? ''}|${type}`;
    if (seen.get(key) !== undefined) return;
    seen.set(key, true);
    const sender = this.agentWithKey(nkey) ?? `key ${nkey}`;
    this.options.notices.warn({
      reason,
      message: message(sender),
      agent_id: sender.slice(0, 256),
      details: {
        intake: 'artifact intake',
        event_type: type,
        nats_user: nkey,
        ...(claimed !== undefined ? { claimed_agent: claimed.slice(0, 256) } : {}),
      },
    });
  }
}
