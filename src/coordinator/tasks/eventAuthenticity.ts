/**
 * The coordinator's check that an agent's event was sent by the agent it names, and is fresh.
 * Subjects are shared (`amf.task.claim`, `amf.result.final`, heartbeats), so NATS permissions cannot
 * bind an event's `agent_id`; the signature can: an agent admitted with a key (its advertised `nkey`)
 * is believed only when the event is signed with that key. A signed heartbeat, goodbye, claim,
 * progress, blocked or delegate event must also be fresh (eventFreshness.ts): a replay is refused.
 * Called once at each intake point (the lifecycle's task and result subscriptions, the results
 * stream, the heartbeat door); a refusal is reported as `amf.policy.warning` naming the offender —
 * the agent whose key signed it when there is one.
 */
import type { AmfEvent } from '../../events/cloudEvent.js';
import {
  checkEventSignature,
  checkEventSignatureAsync,
  checkResultSignature,
  checkResultSignatureAsync,
  SIGNER_ATTRIBUTE,
  type SignatureCheck,
} from '../../identity/eventSignature.js';
import type { AgentRegistry } from '../../registry/agentRegistry.js';
import type { PolicyNotices } from '../../registry/policyNotices.js';
import { BoundedCache } from '../../util/boundedCache.js';
import { InArrivalOrder } from '../../util/inArrivalOrder.js';
import { EventFreshness, type EventFreshnessOptions, type StaleReason } from './eventFreshness.js';

/** Why an event was not taken as the named agent's. */
export type ForgeryReason =
  | 'identity_mismatch'
  | 'forged_event'
  | 'unsigned_event'
  | 'bad_signature'
  | 'agent_key_mismatch'
  | StaleReason;

/**
 * The verdict on one event; when taken, `signer` is the key whose signature was checked (absent for
 * events nobody signed, which only a keyless agent in legacy mode or an unadmitted sender sends).
 */
export type Authenticity =
  | { ok: true; signer?: string }
  | {
      ok: false;
      reason: ForgeryReason;
      /** Who sent it, when that is proven (a valid signature); never merely the agent it names. */
      offender: string | undefined;
      claimed: string;
      message: string;
    };

export interface EventAuthenticityOptions {
  registry: AgentRegistry;
  notices: PolicyNotices;
  /**
   * Legacy (seed) mode: accept unsigned events for agents admitted without a key. Off by default:
   * such an event could come from anyone holding a fabric credential.
   */
  acceptUnsignedFromKeylessAgents?: boolean;
  /** Told when a handler given to {@link EventAuthenticity.acceptInOrder} throws. */
  onHandlerError?: (err: unknown) => void;
  /**
   * Events that may wait for a thread-pool verdict at once (default 1,024). Beyond it the check
   * runs inline, so a flood of signed events slows the event loop, as before, instead of growing
   * a queue without end.
   */
  maxPending?: number;
  /**
   * Whether the Ed25519 check of the next event goes to the thread pool (default: always). The
   * coordinator offloads only while several tasks are in flight: with one, there is nothing to
   * overlap the check with, and waking a pool thread costs more than the check itself.
   */
  offload?: () => boolean;
  /** Bounds of the freshness check (eventFreshness.ts); the defaults suit a LAN. */
  freshness?: EventFreshnessOptions;
}

/** Events whose sender their subject proves (see {@link EventAuthenticity.vouch}): event → key. */
const vouched = new WeakMap<AmfEvent, string>();

/** Identical refusals are reported once per window, so a flood of forgeries is not a flood of warnings. */
const WARNING_WINDOW_MS = 10_000;

export class EventAuthenticity {
  private readonly recentWarnings = new BoundedCache<true>(10_000, WARNING_WINDOW_MS);
  private readonly inOrder: InArrivalOrder<SignatureCheck>;
  private readonly freshness: EventFreshness;

  constructor(private readonly options: EventAuthenticityOptions) {
    this.inOrder = new InArrivalOrder((err) => options.onHandlerError?.(err));
    this.freshness = new EventFreshness(options.freshness);
  }

  /**
   * True when `event` may be taken as from the agent it names; otherwise warns (naming the
   * offender, the claimed agent and where it arrived) and returns false.
   */
  accept(event: AmfEvent, intake: string): boolean {
    return this.conclude(event, intake, this.judge(event));
  }

  /**
   * Records that `event` came on a subject only the user of key `nkey` may publish on, and was
   * checked there to speak for that key's agent (eventIntake.ts, resultIntake.ts). Its sender is
   * then proven by the connection, so no Ed25519 check is made for it: the verdict is as if it were
   * signed by `nkey` (the agent's bound key is still compared, and freshness still checked). An
   * event that names another signer is not vouched for: its signature decides, as anywhere else.
   */
  vouch(event: AmfEvent, nkey: string): void {
    const signer = (event as unknown as Record<string, unknown>)[SIGNER_ATTRIBUTE];
    if (signer === undefined || signer === nkey) vouched.set(event, nkey);
  }

  /**
   * The same decision as {@link accept}, for the hot intakes (claims, progress, finals): the Ed25519
   * check runs in libuv's thread pool, and `then` gets the verdict once this event and every event
   * handed in before it are decided, so events are still acted on in the order they arrived (a
   * claim before the final behind it, the first of two claims first). Two copies of one event (the
   * canonical subject and the reply subject) share one verification.
   */
  acceptInOrder(event: AmfEvent, intake: string, then: (ok: boolean) => void): void {
    const relayed = isRelayedFinal(event);
    const boundTo = vouched.get(event);
    const signature: SignatureCheck | Promise<SignatureCheck> =
      boundTo !== undefined
        ? { ok: true, signer: boundTo }
        : this.inOrder.pending >= (this.options.maxPending ?? 1024) || this.options.offload?.() === false
          ? relayed
            ? checkResultSignature(event)
            : checkEventSignature(event)
          : relayed
            ? checkResultSignatureAsync(event)
            : checkEventSignatureAsync(event);
    this.inOrder.add(signature, (check) => then(this.conclude(event, intake, this.judge(event, check))));
  }

  /** Events handed to {@link acceptInOrder} and not decided yet. */
  get pending(): number {
    return this.inOrder.pending;
  }

  /**
   * Drops the events still waiting for their verdict (shutdown): their handlers never run, and a
   * worker left without an answer stores its final for the next coordinator (docs/reliability.md).
   */
  close(): void {
    this.inOrder.close();
  }

  /**
   * For an event whose signature the caller checked itself (the heartbeat door's proof that an
   * advertisement's key signed it, before the key is bound): true when it is fresh; otherwise warns
   * like {@link accept} and returns false.
   */
  acceptFresh(event: AmfEvent, signer: string, intake: string): boolean {
    return this.conclude(event, intake, { ok: true, signer });
  }

  private conclude(event: AmfEvent, intake: string, judged: Authenticity): boolean {
    const verdict = judged.ok && judged.signer !== undefined ? this.fresh(event, judged.signer) : judged;
    if (verdict.ok) return true;
    const taskId = taskOf(event);
    const key = `${verdict.reason}|${verdict.offender}|${verdict.claimed}|${event.type}|${intake}|${taskId ?? ''}`;
    if (this.recentWarnings.get(key) === undefined) {
      this.recentWarnings.set(key, true);
      this.options.notices.warn({
        reason: verdict.reason,
        message: `${event.type} refused at ${intake}: ${verdict.message}${verdict.offender === undefined ? UNKNOWN_SENDER : ''}`,
        ...(verdict.offender !== undefined ? { agent_id: verdict.offender.slice(0, 256) } : {}),
        ...(taskId !== undefined ? { task_id: taskId } : {}),
        details: { claimed_agent: verdict.claimed.slice(0, 256), intake, event_type: event.type },
      });
    }
    return false;
  }

  /** The freshness verdict on an event signed by `signer` (remembered when taken). */
  private fresh(event: AmfEvent, signer: string): Authenticity {
    const freshness = this.freshness.take(event, signer);
    if (freshness.ok) return { ok: true, signer };
    const identity = event.data.auth_context.identity;
    const payloadAgent = (event.data.payload as { agent_id?: unknown }).agent_id;
    return {
      ok: false,
      reason: freshness.reason,
      // The key's agent said it once; who sent it again is not known (any login may replay it).
      offender: this.agentWithKey(signer) ?? `key ${signer}`,
      claimed: typeof payloadAgent === 'string' ? payloadAgent : identity,
      message: `not fresh: ${freshness.message}`,
    };
  }

  /**
   * The verdict on who sent it, without side effects (freshness is decided after it, by the intake).
   * A final in a coordinator's name is a relayed canonical final:
   * the envelope is the relaying coordinator's, so the worker's result signature decides.
   */
  judge(event: AmfEvent, checked?: SignatureCheck): Authenticity {
    const relayed = isRelayedFinal(event);
    const identity = event.data.auth_context.identity;
    const payloadAgent = (event.data.payload as { agent_id?: unknown }).agent_id;
    const claimed = typeof payloadAgent === 'string' ? payloadAgent : identity;
    const boundTo = vouched.get(event);
    const signature: SignatureCheck =
      checked ??
      (boundTo !== undefined
        ? { ok: true, signer: boundTo }
        : relayed
          ? checkResultSignature(event)
          : checkEventSignature(event));
    // Looked up only on refusal: the agent whose key signed it, else the key. Nothing else proves
    // a sender: an unsigned event, or one whose signature fails, may name anyone (the victim too),
    // and on a shared subject nothing names the connection it came from.
    const signerName = (): string | undefined =>
      signature.ok ? (this.agentWithKey(signature.signer) ?? `key ${signature.signer}`) : undefined;
    const refuse = (reason: ForgeryReason, message: string): Authenticity => ({
      ok: false,
      reason,
      offender: signerName(),
      claimed,
      message,
    });
    if (!relayed && claimed !== identity)
      return refuse(
        'identity_mismatch',
        `sender ${identity} speaks for ${claimed} (an agent acts only as itself)`,
      );
    const listed = this.options.registry.get(claimed);
    // A pending listing (an mDNS advertisement no proof stands behind) binds nothing.
    const known = listed?.status === 'pending' ? undefined : listed;
    // The id's key binding outlives its listing (offline, removed): only forgetting unbinds it.
    const bound = this.options.registry.boundKey(claimed) ?? known?.record.nkey;
    // Not admitted at all: the lifecycle refuses it as from an unadmitted agent, with its own warning.
    if (!known && bound === undefined)
      return signature.ok ? { ok: true, signer: signature.signer } : { ok: true };
    if (signature.ok) {
      if (bound === signature.signer) return { ok: true, signer: signature.signer };
      const offered = (event.data.payload as { nkey?: unknown }).nkey;
      // A fresh key offered for a bound id is a re-binding; another agent's key is a forgery.
      if (bound !== undefined && offered === signature.signer && !this.agentWithKey(signature.signer))
        return refuse(
          'agent_key_mismatch',
          `${claimed} is bound to key ${bound}; an advertisement with key ${signature.signer} is refused until an operator forgets the agent (amf agents forget ${claimed})`,
        );
      return refuse(
        'forged_event',
        `signed by ${signerName()}, not by ${claimed}${bound ? '' : ' (admitted without a key)'}`,
      );
    }
    if (bound === undefined && signature.reason === 'unsigned') {
      // Legacy keyless agents sign nothing: their events cannot be checked for freshness either.
      if (this.options.acceptUnsignedFromKeylessAgents === true) return { ok: true };
      return refuse(
        'unsigned_event',
        `${claimed} was admitted without a key and unsigned events are refused (legacy mode is off)`,
      );
    }
    if (signature.reason === 'unsigned')
      return refuse('unsigned_event', `unsigned, but ${claimed} signs every event with its admitted key`);
    return refuse('bad_signature', `the signature does not verify (${signature.reason}) for ${claimed}`);
  }

  /** The admitted agent bound to `nkey`, if any (only looked up when naming an offender). */
  private agentWithKey(nkey: string): string | undefined {
    return this.options.registry.list().find((a) => a.status !== 'pending' && a.record.nkey === nkey)?.record
      .agent_id;
  }
}

/**
 * Said of a refusal whose sender is not proven. Per-agent subjects name the connection (the artifact
 * intake, agentUsers.ts); shared ones do not, and the agent an event names is never taken for its sender.
 */
const UNKNOWN_SENDER =
  ' (sender unknown: not signed by the named agent, which is therefore not blamed, and a shared subject does not name the connection)';

/** A final in a coordinator's name: relayed, so the worker's result signature is the one to check. */
function isRelayedFinal(event: AmfEvent): boolean {
  return event.type === 'amf.result.final' && event.amfagentrole === 'coordinator';
}

function taskOf(event: AmfEvent): string | undefined {
  const p = event.data.payload as { task_id?: unknown; parent_task_id?: unknown };
  if (typeof p.task_id === 'string') return p.task_id.slice(0, 64);
  if (typeof p.parent_task_id === 'string') return p.parent_task_id.slice(0, 64);
  return event.amftaskid;
}
