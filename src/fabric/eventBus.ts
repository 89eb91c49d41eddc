/**
 * CloudEvents over NATS: encodes AMF events once and publishes them on one or more subjects, and
 * decodes and validates what arrives before a handler sees it. Invalid events never reach handlers;
 * they are reported through `onInvalid` so the caller can answer with a policy warning.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { AmfEvent, AnyAmfEvent } from '../events/cloudEvent.js';
import { validateEvent } from '../events/validateEvent.js';
import { isAmfEventType } from '../events/eventTypes.js';
import { AmfError } from '../errors.js';
import { ReplyInbox, storeUntilAcknowledged } from './replyInbox.js';
import { jsonBytes } from '../util/jsonBytes.js';
import { OwnEchoes } from './ownEchoes.js';

/** Receives every valid event as the union, so a switch on `event.type` narrows its payload. */
export type EventHandler = (event: AnyAmfEvent, subject: string) => void;

export interface SubscribeOptions {
  /** NATS queue group: each message goes to one member of the group. */
  queue?: string;
  /** Called with the reasons when a message is not a valid AMF event. */
  onInvalid?: (errors: string[], subject: string) => void;
  /**
   * `full` (default): JSON-schema validation of the envelope. `shape`: only the structure the
   * handler reads (type, data.payload, data.auth_context) — for a second copy of an event that is
   * fully validated on its canonical subject, where the handler checks the payload fields it uses.
   */
  validation?: 'full' | 'shape';
  /** Drops a parsed message before validation (e.g. the coordinator's own announcements coming back). */
  skip?: (parsed: unknown, subject: string) => boolean;
  /** Drops a message by its subject alone, before it is decoded (e.g. replies to a finished task). */
  skipSubject?: (subject: string) => boolean;
  /**
   * Drops, unread, the copies of this bus's own {@link EventBus.publishOwn} events that NATS echoes
   * back to this subscription (ownEchoes.ts).
   */
  dropOwnEchoes?: boolean;
}

/** The structural minimum a handler may rely on under `validation: 'shape'`. */
function shapeErrors(value: unknown): string[] | undefined {
  if (typeof value !== 'object' || value === null) return ['event must be a JSON object'];
  const e = value as { type?: unknown; data?: { payload?: unknown; auth_context?: { identity?: unknown } } };
  if (!isAmfEventType(e.type)) return ['/type: not an AMF event type'];
  if (typeof e.data !== 'object' || e.data === null) return ['/data: must be an object'];
  if (typeof e.data.payload !== 'object' || e.data.payload === null)
    return ['/data/payload: must be an object'];
  if (typeof e.data.auth_context?.identity !== 'string')
    return ['/data/auth_context/identity: must be a string'];
  return undefined;
}

const decoder = new TextDecoder();

export interface EventBusOptions {
  /**
   * Appended to a PAYLOAD_TOO_LARGE message: what admitted the oversized input and what the server
   * would need (the coordinator names its HTTP body cap and the max_payload that cap requires).
   */
  payloadHint?: string;
  /**
   * Called with each event before it is first serialised, to stamp it in place: the coordinator
   * signs the orders agents act on (coordinator/signedOrders.ts).
   */
  sign?: (event: AmfEvent) => void;
}

/**
 * A `giveUpMs` that never passes: the publish is retried until it is stored, its `signal` is
 * aborted or its connection closes. For what must not be lost (a task's ending, a worker's result):
 * giving up after a while would turn an outage (a full disk, no stream leader) into a loss.
 */
export const UNTIL_CLOSED = Number.POSITIVE_INFINITY;

/** Options of {@link EventBus.publishDurable}. */
export interface DurablePublishOptions {
  msgId: string;
  signal?: AbortSignal;
  giveUpMs?: number;
  onRetry?: (err: unknown) => void;
  /** Core NATS subjects that get the same bytes first (not stored). */
  alsoOn?: readonly string[];
  /** An event this process already acts on: its echo is dropped as for {@link EventBus.publishOwn}. */
  ownEvent?: boolean;
}

/** Thin typed layer over a NATS connection for AMF events. */
export class EventBus {
  // Events checked by assertFits keep their bytes until takeBytes: an announcement is checked,
  // published, then stored on the work queue, from one encoding. (Not longer: short messages are
  // cut from Node's shared 8 KiB pool, so one kept message would keep its whole slab.)
  private readonly encoded = new WeakMap<AmfEvent, Uint8Array>();
  private readonly ownEchoes = new OwnEchoes();
  private echoDroppers = 0;

  constructor(
    readonly nc: NatsConnection,
    private readonly options: EventBusOptions = {},
  ) {}

  /** The connected server's `max_payload` (undefined before its INFO arrived). */
  get maxPayloadBytes(): number | undefined {
    return this.nc.info?.max_payload;
  }

  /**
   * Throws PAYLOAD_TOO_LARGE when `event` is larger than the server's `max_payload`, so a caller can
   * refuse a request before it records anything; NATS itself would only fail the publish.
   */
  assertFits(event: AmfEvent): void {
    this.encode(event, true);
  }

  /**
   * The bytes {@link assertFits} kept for `event` (which must not have changed since), handed over
   * and forgotten: for the last use of an event's encoding. Encoded now when none were kept; throws
   * PAYLOAD_TOO_LARGE as assertFits does.
   */
  takeBytes(event: AmfEvent): Uint8Array {
    const bytes = this.encode(event);
    this.encoded.delete(event);
    return bytes;
  }

  private encode(event: AmfEvent, keep = false): Uint8Array {
    let bytes = this.encoded.get(event);
    if (bytes) return bytes;
    this.options.sign?.(event);
    bytes = jsonBytes(event);
    const max = this.maxPayloadBytes;
    if (max !== undefined && bytes.length > max) {
      const hint = this.options.payloadHint ? `; ${this.options.payloadHint}` : '';
      throw new AmfError(
        'PAYLOAD_TOO_LARGE',
        `the ${event.type} event would be ${bytes.length} bytes, more than the NATS server's max_payload of ${max} bytes${hint}`,
        { event_bytes: bytes.length, nats_max_payload: max },
      );
    }
    if (keep) this.encoded.set(event, bytes);
    return bytes;
  }

  /** Publishes `event` on each subject (default: subject = type), serialising it once. */
  publish(event: AmfEvent, ...subjects: string[]): void {
    const bytes = this.encode(event);
    if (subjects.length === 0) {
      this.nc.publish(event.type, bytes);
      return;
    }
    for (const subject of subjects) this.nc.publish(subject, bytes);
  }

  /**
   * As {@link publish}, for an event this process already acts on: the copy NATS echoes back to this
   * connection's subscriptions with `dropOwnEchoes` is dropped before it is decoded.
   */
  publishOwn(event: AmfEvent, ...subjects: string[]): void {
    const bytes = this.encode(event);
    this.expectEcho(bytes);
    if (subjects.length === 0) this.nc.publish(event.type, bytes);
    else for (const subject of subjects) this.nc.publish(subject, bytes);
  }

  /**
   * As {@link publishOwn}, for bytes already encoded elsewhere (an agent's event a coordinator
   * checked and now records unchanged): the echo on this connection's `dropOwnEchoes` subscriptions
   * is dropped; `also` get the same bytes without an expected echo (subjects those do not read).
   */
  publishOwnBytes(subject: string, bytes: Uint8Array, ...also: string[]): void {
    this.expectEcho(bytes);
    this.nc.publish(subject, bytes);
    for (const other of also) this.nc.publish(other, bytes);
  }

  private expectEcho(bytes: Uint8Array): void {
    if (this.echoDroppers > 0) this.ownEchoes.expect(bytes);
  }

  /** Subscribes to `subject`; handler errors are caught and logged so one bad event cannot stop delivery. */
  subscribe(subject: string, handler: EventHandler, options: SubscribeOptions = {}): Subscription {
    const subOpts: {
      queue?: string;
      callback: (err: Error | null, msg: { subject: string; data: Uint8Array }) => void;
    } = {
      callback: (err, msg) => {
        if (err) return;
        if (options.skipSubject?.(msg.subject)) return;
        if (options.dropOwnEchoes && this.ownEchoes.take(msg.data)) return;
        let parsed: unknown;
        try {
          parsed = JSON.parse(decoder.decode(msg.data));
        } catch (e) {
          options.onInvalid?.([`not JSON: ${(e as Error).message}`], msg.subject);
          return;
        }
        if (options.skip?.(parsed, msg.subject)) return;
        let event: AnyAmfEvent;
        if (options.validation === 'shape') {
          const errors = shapeErrors(parsed);
          if (errors) {
            options.onInvalid?.(errors, msg.subject);
            return;
          }
          event = parsed as AnyAmfEvent;
        } else {
          const result = validateEvent(parsed);
          if (!result.ok) {
            options.onInvalid?.(result.errors, msg.subject);
            return;
          }
          event = result.value;
        }
        try {
          handler(event, msg.subject);
        } catch (e) {
          options.onInvalid?.([`handler failed: ${(e as Error).message}`], msg.subject);
        }
      },
    };
    if (options.queue) subOpts.queue = options.queue;
    if (!options.dropOwnEchoes) return this.nc.subscribe(subject, subOpts);
    this.echoDroppers++;
    const sub = this.nc.subscribe(subject, subOpts);
    void sub.closed.then(() => this.echoDroppers--);
    return sub;
  }

  /**
   * Publishes `event` on `subject` through JetStream and waits for the stream's ack, retrying (with
   * back-off, across reconnects) until it is stored, `signal` is aborted or `giveUpMs` passes. The
   * message id makes a retry after a lost ack a duplicate that the stream drops. Needs no JetStream
   * API permission: the ack arrives on the caller's inbox. Resolves `stored`, `too_large` (over the
   * server's max_payload: retrying cannot help) or `gave_up`.
   */
  async publishDurable(
    event: AmfEvent,
    subject: string,
    options: DurablePublishOptions,
  ): Promise<'stored' | 'too_large' | 'gave_up'> {
    let bytes: Uint8Array;
    try {
      bytes = this.encode(event);
    } catch {
      return 'too_large';
    }
    for (const copy of options.alsoOn ?? []) this.nc.publish(copy, bytes);
    if (options.ownEvent) this.expectEcho(bytes);
    const outcome = await storeUntilAcknowledged(ReplyInbox.of(this.nc), subject, bytes, {
      msgId: options.msgId,
      giveUpMs: options.giveUpMs ?? 10 * 60_000,
      stop: () => options.signal?.aborted === true || this.nc.isClosed(),
      ...(options.onRetry ? { onRetry: options.onRetry } : {}),
    });
    return outcome === 'stored' ? 'stored' : 'gave_up';
  }

  /**
   * Sends `event` on `subject` as a core NATS request and resolves the answer's bytes, or undefined
   * when none came within `timeoutMs` (nobody answered, NATS unreachable) or the event is larger
   * than the server's max_payload. One reply subscription of the connection serves every request
   * (replyInbox.ts).
   */
  async request(event: AmfEvent, subject: string, timeoutMs: number): Promise<Uint8Array | undefined> {
    try {
      const answer = await ReplyInbox.of(this.nc).request(subject, this.encode(event), { timeoutMs });
      return answer.data;
    } catch {
      return undefined;
    }
  }

  /** Waits until the server has processed everything published so far. */
  flush(): Promise<void> {
    return this.nc.flush();
  }
}
