/**
 * Takes workers' final results from the durable AMF_RESULTS stream through one durable consumer
 * shared by every coordinator on the fabric, and hands each to the task lifecycle, which accepts at
 * most one per task. A result is acknowledged only after the lifecycle has decided, so a result
 * published while this coordinator was down or disconnected is delivered when it is back (to it or
 * to another coordinator).
 */
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  type ConsumerMessages,
  type JetStreamManager,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { AmfEventOf } from '../events/cloudEvent.js';
import { validateEvent } from '../events/validateEvent.js';
import { resultSubject } from '../events/subjects.js';
import { RESULTS_CONSUMER, RESULTS_STREAM } from '../fabric/jetstream.js';
import type { LogFn } from '../log.js';

const NANOS_PER_MS = 1_000_000;
/** Deliveries of a result whose task nobody knows, and the pause between them. */
const UNKNOWN_TASK_REDELIVERIES = 5;
const UNKNOWN_TASK_DELAY_MS = 1_000;

export interface ResultIntakeOptions {
  nc: NatsConnection;
  jsm: JetStreamManager;
  /** The lifecycle's decision on one result; `unknown` = a task this coordinator does not follow. */
  accept: (event: AmfEventOf<'amf.result.final'>) => 'accepted' | 'refused' | 'unknown';
  /** Asked about a result for a task nobody here follows (e.g. announced before a restart). */
  adopt?: (event: AmfEventOf<'amf.result.final'>) => Promise<'adopted' | 'ended' | 'unknown' | 'lost_race'>;
  log: LogFn;
}

export class ResultIntake {
  private messages: ConsumerMessages | undefined;
  private loop: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly options: ResultIntakeOptions) {}

  /** Creates the shared durable consumer if needed and starts taking results. */
  async start(): Promise<void> {
    const { jsm, nc } = this.options;
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
          const known = await this.take(raw, msg.seq);
          // Nobody knows the task yet: another coordinator may (its announcement and this result
          // travel on different paths), so offer it again a few times before giving up on it.
          if (!known && msg.info.deliveryCount < UNKNOWN_TASK_REDELIVERIES) msg.nak(UNKNOWN_TASK_DELAY_MS);
          else msg.ack();
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

  /** Hands one result to the lifecycle; false when no coordinator state knows its task. */
  private async take(raw: unknown, seq: number): Promise<boolean> {
    const checked = validateEvent(raw);
    if (!checked.ok || checked.value.type !== 'amf.result.final') {
      this.options.log('warn', 'invalid result in the results stream dropped', {
        seq,
        errors: checked.ok ? [`type ${checked.value.type}`] : checked.errors,
      });
      return true;
    }
    const event = checked.value;
    try {
      if (this.options.accept(event) !== 'unknown') return true;
      return (await this.options.adopt?.(event)) !== 'unknown';
    } catch (err) {
      this.options.log('error', 'result not processed', { seq, err: String(err) });
      return true;
    }
  }

  /** The last result stored for `taskId`, if any (a direct read of the stream by subject). */
  async storedResult(taskId: string): Promise<AmfEventOf<'amf.result.final'> | undefined> {
    const msg = await this.options.jsm.streams
      .getMessage(RESULTS_STREAM, { last_by_subj: resultSubject(taskId) })
      .catch(() => undefined);
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

  async close(): Promise<void> {
    this.closed = true;
    await this.messages?.close().catch(() => undefined);
    await this.loop;
  }
}
