/**
 * Requests on the task path over one wildcard reply subscription per connection: the worker's final
 * sent straight to its coordinator, and the coordinator's JetStream publishes (work offers,
 * canonical finals). It is what nats.js's `nc.request` and `js.publish` do, less the `Error` (with a
 * stack trace) nats.js builds after every answered request, whatever `noAsyncTraces` says — three
 * per task, about a twentieth of the coordinator's time per task at concurrency 1.
 *
 * The reply subject is under the connection's own inbox prefix (an agent may read only its own
 * inbox). A request whose connection drops is not failed at once: it times out, as its caller
 * expects of a request that got no answer (the worker then stores its final; a durable publish is
 * tried again).
 */
import { randomUUID } from 'node:crypto';
import { headers as natsHeaders, type Msg, type NatsConnection } from '@nats-io/transport-node';
import { AmfError, toAmfError } from '../errors.js';

/** The connection's inbox prefix (an agent may subscribe only under its own). */
export function inboxPrefixOf(nc: NatsConnection): string {
  return (nc as { options?: { inboxPrefix?: string } }).options?.inboxPrefix ?? '_INBOX';
}

/** How one publish into a stream went: stored, refused with JetStream's reason, or no answer in time. */
export type StreamAnswer =
  { kind: 'stored' } | { kind: 'refused'; refusal: StreamRefusal } | { kind: 'unanswered' };

/** What a JetStream stream answered to a publish it stored. */
export interface StreamAck {
  stream: string;
  seq: number;
  duplicate: boolean;
}

interface Waiting {
  resolve: (msg: Msg) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

const decoder = new TextDecoder();
const inboxes = new WeakMap<NatsConnection, ReplyInbox>();

export class ReplyInbox {
  private readonly prefix: string;
  private readonly waiting = new Map<string, Waiting>();
  private next = 0;

  /** The connection's one inbox (made on first use). */
  static of(nc: NatsConnection): ReplyInbox {
    let inbox = inboxes.get(nc);
    if (!inbox) {
      inbox = new ReplyInbox(nc);
      inboxes.set(nc, inbox);
    }
    return inbox;
  }

  private constructor(private readonly nc: NatsConnection) {
    this.prefix = `${inboxPrefixOf(nc)}.r${randomUUID().replaceAll('-', '')}`;
    nc.subscribe(`${this.prefix}.*`, {
      callback: (err, msg) => {
        if (!err) this.answer(msg);
      },
    });
  }

  /** Requests in flight. */
  get pending(): number {
    return this.waiting.size;
  }

  /**
   * Publishes `data` on `subject` with a reply subject of this inbox and resolves the first answer.
   * Rejects with `no responders` when the server says nobody listens (status 503), `timeout` when
   * nothing came within `timeoutMs`, or the publish error (a closed connection, too large).
   */
  request(
    subject: string,
    data: Uint8Array,
    options: { timeoutMs: number; msgId?: string; headers?: Readonly<Record<string, string>> },
  ): Promise<Msg> {
    const token = (this.next++).toString(36);
    return new Promise<Msg>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(token);
        reject(new AmfError('TIMEOUT', `timeout: no answer on ${subject} within ${options.timeoutMs} ms`));
      }, options.timeoutMs);
      timer.unref();
      this.waiting.set(token, { resolve, reject, timer });
      try {
        const reply = `${this.prefix}.${token}`;
        if (options.msgId === undefined && options.headers === undefined)
          this.nc.publish(subject, data, { reply });
        else {
          const h = natsHeaders();
          if (options.msgId !== undefined) h.set('Nats-Msg-Id', options.msgId);
          for (const [name, value] of Object.entries(options.headers ?? {})) h.set(name, value);
          this.nc.publish(subject, data, { reply, headers: h });
        }
      } catch (err) {
        this.settle(token);
        reject(err instanceof Error ? err : toAmfError(err));
      }
    });
  }

  /**
   * Publishes into a JetStream stream and resolves its acknowledgement: the stream, the sequence the
   * message got and whether it was a duplicate of `msgId`. Rejects when no stream took it.
   */
  async publishToStream(
    subject: string,
    data: Uint8Array,
    options: { timeoutMs: number; msgId?: string; headers?: Readonly<Record<string, string>> },
  ): Promise<StreamAck> {
    let msg: Msg;
    try {
      msg = await this.request(subject, data, options);
    } catch (err) {
      this.onStreamAnswer?.({ kind: 'unanswered' });
      throw err;
    }
    try {
      const ack = parseStreamAck(msg, subject);
      this.onStreamAnswer?.({ kind: 'stored' });
      return ack;
    } catch (err) {
      if (err instanceof StreamRefusal) this.onStreamAnswer?.({ kind: 'refused', refusal: err });
      throw err;
    }
  }

  /**
   * Told how every publish into a stream through this inbox went (the coordinator learns from it
   * that its store is full or stopped answering, and that it is back: fabricCondition.ts).
   */
  onStreamAnswer: ((answer: StreamAnswer) => void) | undefined;

  private answer(msg: Msg): void {
    const token = msg.subject.slice(this.prefix.length + 1);
    const waiting = this.settle(token);
    if (!waiting) return; // timed out already, or an answer nobody asked for
    if (msg.headers?.code === 503)
      waiting.reject(
        new AmfError('UNAVAILABLE', `no responders: nothing listens on the subject of this request`),
      );
    else waiting.resolve(msg);
  }

  private settle(token: string): Waiting | undefined {
    const waiting = this.waiting.get(token);
    if (!waiting) return undefined;
    this.waiting.delete(token);
    clearTimeout(waiting.timer);
    return waiting;
  }
}

/**
 * JetStream's error codes (`err_code`) that mean the store has no room: the server's storage limit
 * reached (10023 "insufficient resources"), its storage resources exhausted (10047), or a write that
 * failed in the store itself (10077, e.g. "no space left on device").
 */
const STORE_FULL_CODES: ReadonlySet<number> = new Set([10023, 10047, 10077]);

/** A publish that a stream answered with an error: JetStream's own code and description. */
export class StreamRefusal extends Error {
  constructor(
    subject: string,
    /** JetStream's `err_code` (e.g. 10023), when it gave one. */
    readonly errCode: number | undefined,
    readonly description: string,
    status: unknown,
  ) {
    super(`publish to ${subject} refused by JetStream: ${description} (${String(status ?? '?')})`);
    this.name = 'StreamRefusal';
  }

  /** True when the store has no room for it (a full disk, or the server's storage limit). */
  get storeFull(): boolean {
    return this.errCode !== undefined && STORE_FULL_CODES.has(this.errCode);
  }
}

/** A stream's answer to a publish: `{stream, seq, duplicate?}`, or `{error: {code, err_code, description}}`. */
export function parseStreamAck(msg: Msg, subject: string): StreamAck {
  let body: {
    stream?: unknown;
    seq?: unknown;
    duplicate?: unknown;
    error?: { code?: unknown; err_code?: unknown; description?: unknown };
  };
  try {
    body = JSON.parse(decoder.decode(msg.data)) as typeof body;
  } catch {
    throw new AmfError('UNAVAILABLE', `publish to ${subject}: the answer is not a JetStream acknowledgement`);
  }
  if (body.error !== undefined)
    throw new StreamRefusal(
      subject,
      typeof body.error.err_code === 'number' ? body.error.err_code : undefined,
      String(body.error.description ?? 'error'),
      body.error.code,
    );
  if (typeof body.stream !== 'string' || typeof body.seq !== 'number')
    throw new AmfError('UNAVAILABLE', `publish to ${subject}: the answer is not a JetStream acknowledgement`);
  return { stream: body.stream, seq: body.seq, duplicate: body.duplicate === true };
}

/** Options of {@link storeUntilAcknowledged}. */
export interface StoreRetryOptions {
  msgId?: string;
  headers?: Readonly<Record<string, string>>;
  /** Retries stop this long after the first try. */
  giveUpMs: number;
  /** True when retrying must stop now (the caller is closing, its connection closed). */
  stop?: () => boolean;
  /** True for a refusal that is an answer, not a failure (e.g. a later value is stored already). */
  isFinal?: (err: unknown) => boolean;
  onRetry?: (err: unknown) => void;
}

/**
 * Publishes into a stream and waits for its acknowledgement, retrying with back-off (0.1 s doubling
 * to 5 s, across reconnects) until stored, refused for good (`isFinal`), stopped or given up. The
 * one retry loop of every durable write (EventBus.publishDurable, the shared task state).
 */
export async function storeUntilAcknowledged(
  inbox: Pick<ReplyInbox, 'publishToStream'>,
  subject: string,
  data: Uint8Array,
  options: StoreRetryOptions,
): Promise<'stored' | 'refused' | 'gave_up'> {
  const giveUpAt = Date.now() + options.giveUpMs;
  for (let delayMs = 100; ; delayMs = Math.min(delayMs * 2, 5_000)) {
    try {
      await inbox.publishToStream(subject, data, {
        timeoutMs: 5_000,
        ...(options.msgId !== undefined ? { msgId: options.msgId } : {}),
        ...(options.headers !== undefined ? { headers: options.headers } : {}),
      });
      return 'stored';
    } catch (err) {
      if (options.isFinal?.(err)) return 'refused';
      if (options.stop?.() || Date.now() + delayMs > giveUpAt) return 'gave_up';
      options.onRetry?.(err);
      await new Promise((resolve) => setTimeout(resolve, delayMs).unref());
    }
  }
}
