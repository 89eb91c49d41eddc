/**
 * The one place where a worker's final result enters the coordinator, by either of its two paths,
 * and is handed to the task lifecycle, which accepts at most one per task:
 *
 * - direct: the worker sends its final as a core NATS request on `amf.internal.final.<its key>.<task_id>`
 *   (the seed's form without the key is still taken, and judged by its signature alone); the
 *   coordinator that announced the task answers with its decision after acting on it (the canonical
 *   final is published before the answer, on the same connection). Other coordinators stay silent.
 * - stored: when no decision came back (its coordinator is gone, NATS is down), the worker stores
 *   the final in AMF_RESULTS; one durable consumer shared by every coordinator takes it, and it is
 *   acknowledged only after a decision, so a result stored while no coordinator was running is
 *   delivered when one is back. A result that decides nothing (beyond its agent's quota, forged,
 *   invalid, for a task nobody knows) is deleted from the stream once settled; one that ended a
 *   task is kept (a coordinator cut off meanwhile looks it up when it is back).
 *
 * An agent with its own NATS user stores on `amf.internal.result.<its key>.<task_id>` (agentUsers.ts),
 * which only it may publish on: such a result counts against the agent's quota (`task_events.*`) and
 * must speak for the agent bound to that key, or it is dropped and warned naming that agent. On
 * either path, a final on its agent's own subject needs no Ed25519 check: the subject proves who
 * sent it (EventAuthenticity.vouch). The
 * stream refuses new results when full rather than evicting stored ones (jetstream.ts), so no agent
 * can push another's result out; a refused worker keeps its result and retries.
 */
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  type ConsumerMessages,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type { AmfEventOf, AnyAmfEvent } from '../../events/cloudEvent.js';
import { validateEvent } from '../../events/validateEvent.js';
import { isTaskId, resultSubject, SUBJECT_FINAL_PREFIX } from '../../events/subjects.js';
import { agentResultSubject, isAgentNkey, RESULT_STORE_PREFIX } from '../../fabric/agentUsers.js';
import { RESULTS_CONSUMER, RESULTS_STREAM } from '../../fabric/jetstream.js';
import type { LogFn } from '../../log.js';
import { jsonBytes } from '../../util/jsonBytes.js';

const NANOS_PER_MS = 1_000_000;
/** Deliveries of a result whose task nobody knows, and the pause between them. */
const UNKNOWN_TASK_REDELIVERIES = 5;
const UNKNOWN_TASK_DELAY_MS = 1_000;

/** Which path a result came by, and whether it may be offered again (stored results only). */
export interface ResultArrival {
  path: 'direct' | 'stored';
  /** A stored result that will not be delivered again: decide now, whoever announced the task. */
  lastDelivery: boolean;
}

/**
 * The lifecycle's decision on one result: `unknown` = a task this coordinator does not follow;
 * `not_owner` = an open task another coordinator announced, left to that one (a direct result is
 * not answered; a stored one is offered again, and on its last delivery handed to adoption).
 */
export type ResultDecision = 'accepted' | 'refused' | 'unknown' | 'not_owner';

export interface ResultIntakeOptions {
  nc: NatsConnection;
  jsm: JetStreamManager;
  accept: (event: AmfEventOf<'amf.result.final'>, arrival: ResultArrival) => ResultDecision;
  /**
   * The same decision for results sent straight here, given later (the signature is checked off the
   * event loop) but in arrival order with the worker's other events; default: {@link accept}.
   */
  acceptDirect?: (event: AmfEventOf<'amf.result.final'>, decide: (decision: ResultDecision) => void) => void;
  /**
   * The record of an accepted result's task (TaskRecord.recorded): an accepted result is answered
   * (direct) or acknowledged (stored) only once its task's terminal event is stored, so a
   * coordinator that dies before that leaves the result to be adopted instead of lost.
   */
  recorded?: (taskId: string) => Promise<unknown> | undefined;
  /** Asked about a result for a task nobody here follows (e.g. announced before a restart). */
  adopt?: (
    event: AmfEventOf<'amf.result.final'>,
  ) => Promise<'adopted' | 'ended' | 'unknown' | 'lost_race' | 'not_recorded'>;
  /** Who may have stored a result on an agent's own subject, and within what (eventIntake.ts). */
  senders?: StoredResultSenders;
  /** Tells the authenticity check that a stored result's subject proves its sender (EventAuthenticity.vouch). */
  vouch?: (event: AnyAmfEvent, nkey: string) => void;
  log: LogFn;
}

/** The checks of a result stored on an agent's own subject (TaskEventIntake implements them). */
export interface StoredResultSenders {
  /** True when `bytes` more are within the key's quota; otherwise refused and warned. */
  admit(nkey: string, bytes: number, what: string): boolean;
  agentWithKey(nkey: string): string | undefined;
  /** True (and warned) when the event speaks for another agent than `agentId`. */
  refuseForgery(
    nkey: string,
    agentId: string,
    event: AmfEventOf<'amf.result.final'>,
    intake: string,
  ): boolean;
}

/** The key in a stored result's subject: `amf.internal.result.<nkey>.<task_id>` (undefined: the seed's form). */
function storingKey(subject: string): string | undefined {
  const rest = subject.slice(RESULT_STORE_PREFIX.length);
  const dot = rest.indexOf('.');
  return dot < 0 ? undefined : rest.slice(0, dot);
}

/**
 * True when a task's record settled as stored (`EventBus.publishDurable`'s 'stored'); a fabric
 * without streams records nothing and settles with undefined, which counts as stored.
 */
function isStored(outcome: unknown): boolean {
  return outcome === 'stored' || outcome === undefined;
}

/**
 * What becomes of a stored result's message: `done` = acknowledged (decided, and its task's ending
 * on record); `retry` = nobody here decides on it yet: another coordinator may (the one that
 * announced the task, or one that knows it), so it is offered again a few times before it is given
 * up; `keep` = decided, but its task's ending was not stored (this coordinator stopped first): it is
 * offered again, for the coordinator that adopts the task.
 */
type StoredVerdict = 'done' | 'retry' | 'keep' | 'drop';

function settleStored(
  msg: JsMsg,
  verdict: StoredVerdict,
  lastDelivery: boolean,
  jsm: JetStreamManager,
): void {
  if (verdict === 'keep' || (verdict === 'retry' && !lastDelivery)) return msg.nak(UNKNOWN_TASK_DELAY_MS);
  msg.ack();
  // A result that decided nothing takes no room: a flood of them passes through the stream.
  if (verdict === 'drop' || verdict === 'retry')
    void jsm.streams.deleteMessage(RESULTS_STREAM, msg.seq, false).catch(() => undefined);
}

export class ResultIntake {
  private messages: ConsumerMessages | undefined;
  private direct: Subscription | undefined;
  private directKeyed: Subscription | undefined;
  private loop: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly options: ResultIntakeOptions) {}

  /** Listens for direct results, creates the shared durable consumer if needed and takes stored ones. */
  async start(): Promise<void> {
    const { jsm, nc } = this.options;
    this.direct = nc.subscribe(`${SUBJECT_FINAL_PREFIX}*`, { callback: (_err, msg) => this.onDirect(msg) });
    this.directKeyed = nc.subscribe(`${SUBJECT_FINAL_PREFIX}*.*`, {
      callback: (_err, msg) => this.onDirect(msg),
    });
    try {
      await jsm.consumers.info(RESULTS_STREAM, RESULTS_CONSUMER);
    } catch {
      await jsm.consumers
        .add(RESULTS_STREAM, {
          durable_name: RESULTS_CONSUMER,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          // A coordinator that dies holding a result leaves it to another after this long.
          ack_wait: 30_000 * NANOS_PER_MS,
          max_ack_pending: 20_000,
        })
        .catch(async (err: unknown) => {
          // Another coordinator created it at the same moment: that one is as good.
          await jsm.consumers.info(RESULTS_STREAM, RESULTS_CONSUMER).catch(() => {
            throw err;
          });
        });
    }
    const consumer = await jetstream(nc).consumers.get(RESULTS_STREAM, RESULTS_CONSUMER);
    this.messages = await consumer.consume({ max_messages: 512 });
    this.loop = this.run(this.messages);
  }

  /**
   * Takes results until closed. If the subscription ends on its own (the server went away long
   * enough for the client to give the pull up), it is opened again: results wait in the stream.
   */
  private async run(first: ConsumerMessages): Promise<void> {
    let messages = first;
    for (;;) {
      try {
        for await (const msg of messages) {
          let raw: unknown;
          try {
            raw = msg.json<unknown>();
          } catch {
            raw = undefined; // not JSON: reported as invalid below
          }
          const lastDelivery = msg.info.deliveryCount >= UNKNOWN_TASK_REDELIVERIES;
          const sender = this.storedBy(msg, lastDelivery);
          if (sender === null || sender === 'unlisted') {
            // Unlisted: its agent may not be known here yet (this coordinator just started).
            settleStored(msg, sender === null ? 'drop' : 'retry', lastDelivery, this.options.jsm);
            continue;
          }
          // Decided here, but settled later when the decision waits for its task's record: the
          // results after it are not held up meanwhile.
          void this.take(raw, msg.seq, lastDelivery, sender).then(
            (next) => settleStored(msg, next, lastDelivery, this.options.jsm),
            () => msg.nak(UNKNOWN_TASK_DELAY_MS),
          );
        }
      } catch (err) {
        if (!this.closed)
          this.options.log('warn', 'result intake interrupted; reopening', { err: String(err) });
      }
      if (this.closed) return;
      await new Promise((resolve) => setTimeout(resolve, 1_000).unref());
      if (this.closed) return;
      try {
        const consumer = await jetstream(this.options.nc).consumers.get(RESULTS_STREAM, RESULTS_CONSUMER);
        messages = this.messages = await consumer.consume({ max_messages: 512 });
      } catch (err) {
        this.options.log('warn', 'result intake not reopened yet', { err: String(err) });
      }
    }
  }

  /**
   * Who stored `msg`: its agent and key when it came on an agent's own subject, undefined for the
   * seed's subject (only the shared legacy user may publish there), null when it is dropped unread
   * (beyond the agent's quota: warned by the checks), `unlisted` while no agent is bound to its key.
   */
  private storedBy(
    msg: JsMsg,
    lastDelivery: boolean,
  ): { nkey: string; agentId: string } | undefined | null | 'unlisted' {
    const senders = this.options.senders;
    const nkey = storingKey(msg.subject);
    if (nkey === undefined || !senders) return undefined;
    if (!isAgentNkey(nkey)) return null;
    // Counted once per result, not again on each redelivery.
    if (msg.info.deliveryCount === 1 && !senders.admit(nkey, msg.data.length, 'a stored result')) return null;
    const agentId = senders.agentWithKey(nkey);
    if (agentId === undefined) {
      if (lastDelivery)
        this.options.log('warn', 'stored result of a key no agent is bound to dropped', { nats_user: nkey });
      return 'unlisted';
    }
    return { nkey, agentId };
  }

  /**
   * A result sent straight by its worker: decided at once and answered, so the worker need not
   * store it. Silence (another coordinator's task, or one nobody here knows) makes the worker store it.
   */
  private onDirect(msg: Msg): void {
    const respond = (decision: ResultDecision) => {
      try {
        msg.respond(jsonBytes({ decision }));
      } catch {
        // The connection closed meanwhile: the worker gets no answer and stores its result instead.
      }
    };
    const answer = (decision: ResultDecision) => {
      if (decision !== 'accepted' && decision !== 'refused') return;
      const recorded = decision === 'accepted' ? this.recordOf(msg.subject) : undefined;
      // `accepted` means stored: an ending the stream did not take (this coordinator stopped while
      // retrying it) gets no answer, so the worker keeps its result and stores it itself.
      if (recorded)
        void recorded.then(
          (outcome) => {
            if (isStored(outcome)) respond(decision);
          },
          () => undefined,
        );
      else respond(decision);
    };
    // On an agent's own subject (agentFinalSubject), its sender is known before it is read.
    const sender = this.sentBy(msg.subject);
    if (sender === null) return answer('refused');
    // No agent bound to the key here yet (just admitted elsewhere): silence, so the worker stores it.
    if (sender === 'unlisted') return;
    let event: AmfEventOf<'amf.result.final'>;
    try {
      const checked = validateEvent(msg.json<unknown>());
      if (!checked.ok || checked.value.type !== 'amf.result.final') {
        this.options.log('warn', 'invalid direct result dropped', {
          subject: msg.subject,
          errors: checked.ok ? [`type ${checked.value.type}`] : checked.errors,
        });
        return answer('refused');
      }
      event = checked.value;
    } catch (err) {
      this.options.log('warn', 'direct result not processed', { subject: msg.subject, err: String(err) });
      return answer('refused');
    }
    if (sender) {
      if (this.options.senders?.refuseForgery(sender.nkey, sender.agentId, event, 'the direct final subject'))
        return answer('refused');
      this.options.vouch?.(event, sender.nkey);
    }
    if (this.options.acceptDirect) return this.options.acceptDirect(event, answer);
    let decision: ResultDecision = 'refused';
    try {
      decision = this.options.accept(event, { path: 'direct', lastDelivery: false });
    } catch (err) {
      this.options.log('warn', 'direct result not processed', { subject: msg.subject, err: String(err) });
    }
    answer(decision);
  }

  /**
   * Hands one stored result to the lifecycle and says what becomes of its message (see
   * {@link StoredVerdict}) once its task's record, when it waits for one, is settled.
   */
  private async take(
    raw: unknown,
    seq: number,
    lastDelivery: boolean,
    sender?: { nkey: string; agentId: string },
  ): Promise<StoredVerdict> {
    const checked = validateEvent(raw);
    if (!checked.ok || checked.value.type !== 'amf.result.final') {
      this.options.log('warn', 'invalid result in the results stream dropped', {
        seq,
        errors: checked.ok ? [`type ${checked.value.type}`] : checked.errors,
      });
      return 'drop';
    }
    const event = checked.value;
    if (sender) {
      if (this.options.senders?.refuseForgery(sender.nkey, sender.agentId, event, 'the results stream'))
        return 'drop';
      // Stored on its agent's own subject and checked to speak for it: no signature check needed.
      this.options.vouch?.(event, sender.nkey);
    }
    try {
      const decision = this.options.accept(event, { path: 'stored', lastDelivery });
      // Refused too: it may be the copy its worker stored while this coordinator's record of the
      // same result was still on its way.
      if (decision === 'accepted' || decision === 'refused') {
        const record = this.options.recorded?.(event.data.payload.task_id);
        if (!record) return 'done';
        return record.then(
          (outcome) => (isStored(outcome) ? 'done' : 'keep'),
          () => 'keep',
        );
      }
      if (decision === 'not_owner') return 'retry'; // its own coordinator may take it on a redelivery
      const verdict = await this.options.adopt?.(event);
      // Adopted, but its ending not stored: the result stays in the stream for the next try.
      if (verdict === 'not_recorded') return 'keep';
      return verdict === 'unknown' ? 'retry' : 'done';
    } catch (err) {
      this.options.log('error', 'result not processed', { seq, err: String(err) });
      return 'done';
    }
  }

  /** The record promise of the task a direct final's subject names (its last token). */
  private recordOf(subject: string): Promise<unknown> | undefined {
    return this.options.recorded?.(subject.slice(subject.lastIndexOf('.') + 1));
  }

  /**
   * Who sent a direct final: undefined on the seed's subject (`amf.internal.final.<task>`, judged by
   * its signature), the agent and key on an agent's own one, null when refused unread (not a key, or
   * beyond its quota: warned), `unlisted` while no agent is bound to the key here.
   */
  private sentBy(subject: string): { nkey: string; agentId: string } | undefined | null | 'unlisted' {
    const rest = subject.slice(SUBJECT_FINAL_PREFIX.length);
    const dot = rest.indexOf('.');
    if (dot < 0) return undefined;
    const senders = this.options.senders;
    const nkey = rest.slice(0, dot);
    if (!senders || !isAgentNkey(nkey)) return null;
    const agentId = senders.agentWithKey(nkey);
    return agentId === undefined ? 'unlisted' : { nkey, agentId };
  }

  /**
   * The last result stored for `taskId`, if any (a direct read of the stream by subject): on the
   * agent's own subject when the key of the agent that holds it is known, else on the seed's.
   */
  async storedResult(taskId: string, nkey?: string): Promise<AmfEventOf<'amf.result.final'> | undefined> {
    if (!isTaskId(taskId)) return undefined;
    const read = (subject: string) =>
      this.options.jsm.streams.getMessage(RESULTS_STREAM, { last_by_subj: subject }).catch(() => undefined);
    const msg =
      (isAgentNkey(nkey) ? await read(agentResultSubject(nkey, taskId)) : undefined) ??
      (await read(resultSubject(taskId))) ??
      (nkey === undefined
        ? await this.anyAgentsSubject(taskId).then((s) => (s === undefined ? undefined : read(s)))
        : undefined);
    if (!msg) return undefined;
    let raw: unknown;
    try {
      raw = msg.json<unknown>();
    } catch {
      return undefined;
    }
    const checked = validateEvent(raw);
    return checked.ok && checked.value.type === 'amf.result.final' ? checked.value : undefined;
  }

  /** The subject of a result for `taskId` some agent stored on its own subject (its holder unknown here). */
  private async anyAgentsSubject(taskId: string): Promise<string | undefined> {
    const info = await this.options.jsm.streams
      .info(RESULTS_STREAM, { subjects_filter: `${RESULT_STORE_PREFIX}*.${taskId}` })
      .catch(() => undefined);
    return Object.keys(info?.state.subjects ?? {})[0];
  }

  async close(): Promise<void> {
    this.closed = true;
    this.direct?.unsubscribe();
    this.directKeyed?.unsubscribe();
    await this.messages?.close().catch(() => undefined);
    await this.loop;
  }
}
