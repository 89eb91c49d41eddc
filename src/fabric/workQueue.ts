/**
 * The worker's side of the work queue (stream AMF_WORK): pull requests sized by the caller (its free
 * slots), and the handle of each delivered announcement to tell JetStream how the task goes — in
 * progress while the handler runs, acknowledged once its result is decided, terminated when it must
 * not be delivered again. A message not acknowledged in time goes to another worker (bounded
 * redeliveries, set on the consumer by the coordinator).
 */
import { randomUUID } from 'node:crypto';
import { AckPolicy, JetStreamApiError, type JetStreamManager } from '@nats-io/jetstream';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { workConsumerName, workSubject } from '../events/subjects.js';
import { inboxPrefixOf, ReplyInbox } from './replyInbox.js';
import { WORK_STREAM } from './jetstream.js';
import { jsonBytes } from '../util/jsonBytes.js';
import { toAmfError } from '../errors.js';

/**
 * The header of a work-queue message that carries its offer nonce: the announcement's body is the
 * one every observer sees, the nonce only the worker that takes the message
 * (coordinator/tasks/offerNonce.ts).
 */
export const OFFER_NONCE_HEADER = 'Amf-Offer';
/**
 * The header naming the agents (space-separated ids) that may not take a re-offered task: one whose
 * claim was refused (not admitted) or whose handler ran past its timeout. Their workers pass it on.
 */
export const NOT_FOR_HEADER = 'Amf-Not-For';

/** One pulled announcement and its acknowledgement handle. */
export interface WorkItem {
  /** The message body, parsed as JSON (undefined when it is not JSON). */
  body: unknown;
  /** The offer nonce the message carries (echoed in the claim and the final), when it has one. */
  offer: string | undefined;
  /** Agents that may not take it (NOT_FOR_HEADER); empty for a first offer. */
  notFor: readonly string[];
  /** 1 on the first delivery; more when another worker took it and did not finish. */
  deliveryCount: number;
  /** Resets the redelivery timer while the handler runs. */
  working(): void;
  /** Done with it (result decided, or the task ended): it leaves the stream. */
  ack(): void;
  /** Never deliver it again (malformed, or refused by this worker for good). */
  term(): void;
  /**
   * Not taken after all (this worker is draining, or may not take it): deliver it to another worker,
   * now or after `delayMs`.
   */
  nak(delayMs?: number): void;
}

/** How long a pull request waits on the server for messages before it expires. */
const PULL_EXPIRES_MS = 2_000;
/** How long past its expiry a pull may go unanswered (sent just before the server went away). */
const PULL_GRACE_MS = 1_000;
/** The pause before pulling again when the server refused a pull. */
const PULL_BACKOFF_MS = 1_000;
/** The pause before asking again whether a missing consumer exists now. */
const CONSUMER_CHECK_MS = 250;
const NANOS_PER_MS = 1_000_000;
const decoder = new TextDecoder();

interface PullRequest {
  asked: number;
  delivered: number;
  timer: NodeJS.Timeout;
}

export interface WorkQueuePullerOptions {
  /** Called with each delivered announcement; `requested` is false for one no open pull asked for. */
  onItem: (item: WorkItem, requested: boolean) => void;
  /**
   * Called when a pull request ends with `undelivered` of its messages never sent (expired, refused),
   * and with 0 when the consumer turned out to exist: time to pull (again).
   */
  onSettled: (undelivered: number) => void;
}

/**
 * Pulls one tag's work queue over one long-lived inbox subscription: each `pull(n)` is one pull
 * request for up to n messages (the caller's free slots), so a busy worker costs one request per
 * batch, not a subscription and a request per task. Every request is tracked by its own reply
 * subject; when it expires, is refused or goes unanswered (the server went away), the caller is told
 * how many of its messages never came, so it can ask again: an outage of any length is only a pause.
 */
export class WorkQueuePuller {
  private readonly inbox: string;
  private readonly sub: Subscription;
  private readonly open = new Map<string, PullRequest>();
  private pausedUntil = 0;
  private closed = false;
  /** The consumer is known to exist (a pull to a missing one is never answered at all). */
  private ready = false;
  private checking = false;
  private readonly pullSubject: string;
  private readonly infoSubject: string;

  constructor(
    private readonly nc: NatsConnection,
    consumerName: string,
    private readonly options: WorkQueuePullerOptions,
  ) {
    this.inbox = `${inboxPrefixOf(nc)}.work.${randomUUID().replaceAll('-', '')}`;
    this.pullSubject = `$JS.API.CONSUMER.MSG.NEXT.${WORK_STREAM}.${consumerName}`;
    this.infoSubject = `$JS.API.CONSUMER.INFO.${WORK_STREAM}.${consumerName}`;
    this.sub = nc.subscribe(`${this.inbox}.*`, { callback: (_err, msg) => this.onMessage(msg) });
  }

  /**
   * Messages asked for by open pull requests and not delivered yet. Counted from the open requests
   * themselves (a handful), never kept as a running total: a total drifts for good when the server's
   * count of a request's undelivered messages differs from ours, and a worker whose total stays
   * above its batch never pulls again.
   */
  get outstanding(): number {
    let count = 0;
    for (const request of this.open.values()) count += request.asked - request.delivered;
    return count;
  }

  /** True while pulls should wait (the consumer is missing, or the server refused the last one). */
  get paused(): boolean {
    return Date.now() < this.pausedUntil;
  }

  /**
   * Sends one pull request for up to `n` messages (n ≥ 1). Until the consumer is known to exist (the
   * coordinator creates it when it admits an agent of the tag) it asks whether it does instead, and
   * pauses briefly when not; the caller simply calls again.
   */
  pull(n: number): void {
    if (this.closed || n < 1) return;
    if (!this.ready) {
      this.checkConsumer();
      return;
    }
    const id = randomUUID().replaceAll('-', '');
    const timer = setTimeout(() => {
      // Unanswered: the server went away, or the consumer did (a pull to a missing one gets no
      // answer at all): check that it exists before pulling again.
      this.ready = false;
      this.settle(id);
    }, PULL_EXPIRES_MS + PULL_GRACE_MS);
    timer.unref();
    this.open.set(id, { asked: n, delivered: 0, timer });
    try {
      this.nc.publish(this.pullSubject, jsonBytes({ batch: n, expires: PULL_EXPIRES_MS * NANOS_PER_MS }), {
        reply: `${this.inbox}.${id}`,
      });
    } catch {
      this.settle(id); // the connection is closed: nothing was asked
    }
  }

  private checkConsumer(): void {
    if (this.checking) return;
    this.checking = true;
    this.nc
      .request(this.infoSubject, undefined, { timeout: 2_000 })
      .then((answer) => {
        const info = answer.json<{ error?: unknown }>();
        if (info.error === undefined) this.ready = true;
        else this.pausedUntil = Date.now() + CONSUMER_CHECK_MS;
      })
      .catch(() => {
        this.pausedUntil = Date.now() + CONSUMER_CHECK_MS;
      })
      .finally(() => {
        this.checking = false;
        if (this.ready) this.options.onSettled(0);
      });
  }

  /**
   * Forgets every open request (after a reconnect: a server that restarted knows none of them), so
   * the caller asks afresh at once. A message one of them still brings is delivered as unrequested.
   */
  abandonAll(): void {
    this.ready = false;
    for (const id of [...this.open.keys()]) this.settle(id);
  }

  close(): void {
    this.closed = true;
    this.abandonAll();
    this.sub.unsubscribe();
  }

  private onMessage(msg: Msg): void {
    const status = msg.headers?.code ?? 0;
    if (status !== 0 && !msg.reply) {
      // A status names its request by the reply subject: 408 expired, 409 refused (consumer
      // deleted, too many waiting pulls), 503 no consumer yet; 100 is an idle heartbeat (not asked
      // for). Anything but a heartbeat ends the request; the server says how many it never sent.
      if (status === 100) return;
      if (status !== 408) {
        this.pausedUntil = Date.now() + PULL_BACKOFF_MS;
        if (status === 409 || status === 503) this.ready = false;
      }
      const pending = Number(msg.headers?.get('Nats-Pending-Messages'));
      this.settle(msg.subject.slice(this.inbox.length + 1), Number.isInteger(pending) ? pending : undefined);
      return;
    }
    // A delivered message carries its stream subject, not the request's: the server serves waiting
    // requests in order, so it is counted against the oldest open one.
    let requested = false;
    for (const [id, request] of this.open) {
      if (request.delivered >= request.asked) continue;
      requested = true;
      request.delivered++;
      if (request.delivered >= request.asked) this.finish(id, request);
      break;
    }
    this.options.onItem(toWorkItem(this.nc, msg), requested);
  }

  /**
   * Ends an open request; its undelivered messages (as the server counted them, else as counted
   * here) go back to the caller.
   */
  private settle(id: string, serverPending?: number): void {
    const request = this.open.get(id);
    if (!request) return;
    this.finish(id, request);
    const missing = request.asked - request.delivered;
    // Told even when the server's count is 0 and ours is not: what this request held is free again.
    if (missing > 0) this.options.onSettled(Math.min(missing, serverPending ?? missing));
  }

  private finish(id: string, request: PullRequest): void {
    clearTimeout(request.timer);
    this.open.delete(id);
  }
}

/** The delivery count from a JetStream ack subject (`$JS.ACK.<stream>.<consumer>.<delivered>...`, or v2). */
function deliveryCountOf(reply: string): number {
  const tokens = reply.split('.');
  const n = Number(tokens.length >= 12 ? tokens[6] : tokens[4]);
  return Number.isInteger(n) && n >= 1 ? n : 1;
}

function toWorkItem(nc: NatsConnection, msg: Msg): WorkItem {
  let body: unknown;
  try {
    body = JSON.parse(decoder.decode(msg.data)) as unknown;
  } catch {
    body = undefined;
  }
  const reply = msg.reply ?? '';
  const offer = msg.headers?.get(OFFER_NONCE_HEADER);
  const notFor = msg.headers?.get(NOT_FOR_HEADER);
  let acked = false;
  const send = (what: string, final: boolean) => {
    if (acked || !reply) return;
    if (final) acked = true;
    try {
      nc.publish(reply, Buffer.from(what, 'utf8'));
    } catch {
      // Connection closed: the message is redelivered after the ack wait.
    }
  };
  return {
    body,
    offer: offer ? offer : undefined,
    notFor: notFor ? notFor.split(' ').filter((id) => id !== '') : [],
    deliveryCount: deliveryCountOf(reply),
    working: () => send('+WPI', false),
    ack: () => send('+ACK', true),
    term: () => send('+TERM', true),
    nak: (delayMs) =>
      send(delayMs ? `-NAK ${JSON.stringify({ delay: Math.round(delayMs * NANOS_PER_MS) })}` : '-NAK', true),
  };
}

/** A worker that stops signalling progress this long loses its message to another worker. */
export const WORK_ACK_WAIT_MS = 30_000;
/** Deliveries of one announcement before JetStream gives up on it (the coordinator's TTL rules then). */
const WORK_MAX_DELIVER = 3;

/**
 * The coordinator's side of the work queue: creates each tag's durable consumer, offers a task's
 * announcement (the stream's sequence number comes back, so the coordinator can withdraw it) and
 * withdraws it when the task ends or is re-announced, so no worker pulls a task that is over.
 */
export class WorkQueueWriter {
  private readonly consumers = new Map<string, Promise<void>>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
  ) {}

  /** Creates the tag's consumer once (idempotent across coordinators). */
  ensureConsumer(tag: string): Promise<void> {
    let ready = this.consumers.get(tag);
    if (!ready) {
      let name: string;
      try {
        name = workConsumerName(tag);
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : toAmfError(err));
      }
      ready = this.jsm.consumers
        .info(WORK_STREAM, name)
        .then(() => undefined)
        .catch(() =>
          this.jsm.consumers
            .add(WORK_STREAM, {
              durable_name: name,
              filter_subject: workSubject(tag),
              ack_policy: AckPolicy.Explicit,
              ack_wait: WORK_ACK_WAIT_MS * NANOS_PER_MS,
              max_deliver: WORK_MAX_DELIVER,
              max_ack_pending: 100_000,
            })
            .then(() => undefined),
        );
      // A failure is not cached: the next offer tries again.
      ready.catch(() => this.consumers.delete(tag));
      this.consumers.set(tag, ready);
    }
    return ready;
  }

  /**
   * Stores the announcement on the tag's work subject, with its offer nonce and the agents that may
   * not take it as headers; resolves its stream sequence. No message id: an offer is published once (never retried), so the stream keeps
   * no duplicate-window entry for it.
   */
  async offer(bytes: Uint8Array, tag: string, nonce?: string, notFor?: readonly string[]): Promise<number> {
    await this.ensureConsumer(tag);
    const headers: Record<string, string> = {};
    if (nonce !== undefined) headers[OFFER_NONCE_HEADER] = nonce;
    if (notFor?.length) headers[NOT_FOR_HEADER] = notFor.join(' ');
    const ack = await ReplyInbox.of(this.nc).publishToStream(workSubject(tag), bytes, {
      timeoutMs: 5_000,
      ...(nonce !== undefined || notFor?.length ? { headers } : {}),
    });
    return ack.seq;
  }

  /**
   * Removes an offered announcement that nobody should take any more. While the stream cannot be
   * reached (NATS away, this coordinator cut off from the rest of a cluster, the stream electing a
   * leader) the delete is tried again, 0.5 s doubling to 5 s, for up to 10 minutes: a task that
   * ended during a partition (its requester gave up) must not be pulled and run once the partition
   * heals. An answer from the stream ends the tries, a refusal included (the message is gone: its
   * worker acknowledged it, or it was deleted already).
   */
  withdraw(seq: number): void {
    void this.deleteUntilAnswered(seq);
  }

  private async deleteUntilAnswered(seq: number): Promise<void> {
    const giveUpAt = Date.now() + WITHDRAW_GIVE_UP_MS;
    for (let delayMs = 500; ; delayMs = Math.min(delayMs * 2, 5_000)) {
      try {
        await this.jsm.streams.deleteMessage(WORK_STREAM, seq, false);
        return;
      } catch (err) {
        // The stream answered (503: JetStream could not serve it yet, which is not an answer).
        if (err instanceof JetStreamApiError && err.status !== 503) return;
        if (this.nc.isClosed() || Date.now() + delayMs > giveUpAt) return;
        await new Promise((resolve) => setTimeout(resolve, delayMs).unref());
      }
    }
  }
}

/** How long the withdrawal of an offer is retried while the work queue cannot be reached. */
const WITHDRAW_GIVE_UP_MS = 10 * 60_000;
