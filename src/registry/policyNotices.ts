/**
 * The coordinator's warnings and denials. One place builds them so every notice carries the same
 * shape (`reason`, `message`, optional task and agent) and goes to the reply subject when it ends a
 * task the requester waits for.
 */
import { createEvent, type EventSender } from '../events/cloudEvent.js';
import type { PolicyPayload } from '../events/payloads.js';
import { terminalEventMsgId } from '../events/subjects.js';
import { UNTIL_CLOSED, type EventBus } from '../fabric/eventBus.js';

/** Stable reason codes of the notices the coordinator emits. */
export type PolicyReason =
  | 'task_ttl_expired'
  | 'worker_silent'
  | 'worker_offline'
  | 'invalid_transition'
  | 'duplicate_claim'
  | 'claim_from_unadmitted_agent'
  | 'claim_without_offer'
  | 'claim_from_disabled_agent'
  | 'agent_disabled'
  | 'agent_enabled'
  | 'reply_subject_invalid'
  | 'invalid_announce'
  | 'delegation_cycle'
  | 'delegation_depth_exceeded'
  | 'delegation_invalid'
  | 'no_agent_for_tag'
  | 'requester_timeout'
  | 'requester_cancelled'
  | 'task_cancelled'
  | 'invalid_event'
  | 'advertisement_invalid'
  | 'visibility_requires_svid'
  | 'advertisement_rate_limited'
  | 'watcher_summary_mismatch'
  | 'watcher_output_unverified'
  | 'card_fetch_failed'
  | 'admission_busy'
  | 'watcher_timeout'
  | 'policy_unavailable'
  /** Deterministic validation and policy reasons (see admission/validateAdvertisement.ts, policies/). */
  | (string & { readonly __admissionReason?: never });

export interface NoticeOptions {
  traceId?: string;
  /** A reply subject that gets the notice too. */
  extraSubject?: string;
  /** Given the promise of a terminal notice's record in AMF_EVENTS (TaskRecord.recorded). */
  onRecord?: (recorded: Promise<unknown>) => void;
}

export class PolicyNotices {
  constructor(
    private readonly bus: EventBus,
    private readonly sender: EventSender,
  ) {}

  /** Publishes `amf.policy.warning`; also on `extraSubject` (a reply subject) when given. */
  warn(payload: PolicyPayload & { reason: PolicyReason }, options: NoticeOptions = {}): void {
    this.send('amf.policy.warning', payload, options);
  }

  /** Publishes `amf.policy.deny`; also on `extraSubject` when given. */
  deny(payload: PolicyPayload & { reason: PolicyReason }, options: NoticeOptions = {}): void {
    this.send('amf.policy.deny', payload, options);
  }

  private send(
    type: 'amf.policy.warning' | 'amf.policy.deny',
    payload: PolicyPayload,
    options: NoticeOptions,
  ): void {
    const event = createEvent({
      type,
      sender: this.sender,
      payload,
      ...(payload.task_id !== undefined ? { taskId: payload.task_id } : {}),
      ...(options.traceId !== undefined ? { traceId: options.traceId } : {}),
    });
    if (payload.terminal === true) {
      // A task's ending must reach the record (AMF_EVENTS) even when it is decided while NATS is
      // away: stored through JetStream, retried until the fabric is back (duplicates are dropped by
      // the task's terminal message id: one ending per task in the stream, whoever sends it).
      // Live subscribers get it from the same publish. Never given up while the coordinator runs:
      // an ending decided during an outage (a full disk) is stored once the fabric takes it again.
      const msgId = payload.task_id !== undefined ? terminalEventMsgId(payload.task_id) : event.id;
      const recorded = this.bus.publishDurable(event, type, { msgId, giveUpMs: UNTIL_CLOSED });
      options.onRecord?.(recorded);
      if (options.extraSubject) this.bus.publish(event, options.extraSubject);
      return;
    }
    if (options.extraSubject) this.bus.publish(event, type, options.extraSubject);
    else this.bus.publish(event);
  }
}
