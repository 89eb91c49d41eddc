/**
 * The worker's side of the work queue (stream AMF_WORK): pull one announcement at a time from the
 * tag's durable consumer, only when a slot is free, and tell JetStream how the task goes — in
 * progress while the handler runs, acknowledged once its result is stored, terminated when it must
 * not be delivered again. A message not acknowledged in time goes to another worker (bounded
 * redeliveries, set on the consumer by the coordinator).
 */
import { AckPolicy, jetstream, type Consumer, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { workConsumerName, workSubject } from '../events/subjects.js';
import { WORK_STREAM } from './jetstream.js';

/** One pulled announcement and its acknowledgement handle. */
export interface WorkItem {
  /** The message body, parsed as JSON (undefined when it is not JSON). */
  body: unknown;
  /** 1 on the first delivery; more when another worker took it and did not finish. */
  deliveryCount: number;
  /** Resets the redelivery timer while the handler runs. */
  working(): void;
  /** Done with it (result stored, or the task ended): it leaves the stream. */
  ack(): void;
  /** Never deliver it again (malformed, or refused by this worker for good). */
  term(): void;
  /** Not taken after all (this worker is draining): deliver it to another worker now. */
  nak(): void;
}

/** How long past its own expiry a pull may go unanswered before it is abandoned. */
const PULL_GRACE_MS = 3_000;

export class WorkQueueReader {
  private consumer: Consumer | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly consumerName: string,
  ) {}

  /**
   * Waits up to `waitMs` for the next item. Resolves undefined when none came, when the consumer does
   * not exist yet (the coordinator creates it when it admits an agent of the tag) or when NATS is
   * unreachable: the caller just asks again, so an outage of any length is only a pause.
   */
  async next(waitMs: number): Promise<WorkItem | undefined> {
    try {
      this.consumer ??= await jetstream(this.nc).consumers.get(WORK_STREAM, this.consumerName);
      // A pull sent just before the server went away may never be answered: give up on it after a
      // grace period and pull afresh (a message it still brings later is redelivered after the ack
      // wait, since nobody acknowledges it).
      let timer: NodeJS.Timeout | undefined;
      const stuck = new Promise<'stuck'>((resolve) => {
        timer = setTimeout(() => resolve('stuck'), waitMs + PULL_GRACE_MS);
        timer.unref();
      });
      const msg = await Promise.race([this.consumer.next({ expires: waitMs }), stuck]).finally(() =>
        clearTimeout(timer),
      );
      if (msg === 'stuck') {
        this.consumer = undefined;
        return undefined;
      }
      return msg ? toWorkItem(msg) : undefined;
    } catch {
      this.consumer = undefined;
      if (!this.nc.isClosed()) await new Promise((resolve) => setTimeout(resolve, Math.min(waitMs, 1000)));
      return undefined;
    }
  }
}

function toWorkItem(msg: JsMsg): WorkItem {
  let body: unknown;
  try {
    body = msg.json<unknown>();
  } catch {
    body = undefined;
  }
  return {
    body,
    deliveryCount: msg.info.deliveryCount,
    working: () => msg.working(),
    ack: () => msg.ack(),
    term: () => msg.term(),
    nak: () => msg.nak(),
  };
}

const NANOS_PER_MS = 1_000_000;
/** A worker that stops signalling progress this long loses its message to another worker. */
const WORK_ACK_WAIT_MS = 30_000;
/** Deliveries of one announcement before JetStream gives up on it (the coordinator's TTL rules then). */
const WORK_MAX_DELIVER = 3;

/**
 * The coordinator's side of the work queue: creates each tag's durable consumer, offers a task's
 * announcement (the stream's sequence number comes back, so the coordinator can withdraw it) and
 * withdraws it when the task ends or is re-announced, so no worker pulls a task that is over.
 */
export class WorkQueueWriter {
  private readonly consumers = new Map<string, Promise<void>>();
  private readonly js;

  constructor(
    nc: NatsConnection,
    private readonly jsm: JetStreamManager,
  ) {
    this.js = jetstream(nc);
  }

  /** Creates the tag's consumer once (idempotent across coordinators). */
  ensureConsumer(tag: string): Promise<void> {
    let ready = this.consumers.get(tag);
    if (!ready) {
      let name: string;
      try {
        name = workConsumerName(tag);
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
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

  /** Stores the announcement on the tag's work subject; resolves its stream sequence. */
  async offer(bytes: Uint8Array, tag: string, msgId: string): Promise<number> {
    await this.ensureConsumer(tag);
    const ack = await this.js.publish(workSubject(tag), bytes, { msgID: msgId, timeout: 5_000 });
    return ack.seq;
  }

  /** Removes an offered announcement that nobody should take any more (best effort). */
  withdraw(seq: number): void {
    void this.jsm.streams.deleteMessage(WORK_STREAM, seq, false).catch(() => undefined);
  }
}
