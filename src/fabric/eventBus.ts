/**
 * CloudEvents over NATS: encodes AMF events once and publishes them on one or more subjects, and
 * decodes and validates what arrives before a handler sees it. Invalid events never reach handlers;
 * they are reported through `onInvalid` so the caller can answer with a policy warning.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { AmfEvent } from '../events/cloudEvent.js';
import { validateEvent } from '../events/validateEvent.js';

export type EventHandler = (event: AmfEvent, subject: string) => void;

export interface SubscribeOptions {
  /** NATS queue group: each message goes to one member of the group. */
  queue?: string;
  /** Called with the reasons when a message is not a valid AMF event. */
  onInvalid?: (errors: string[], subject: string) => void;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Thin typed layer over a NATS connection for AMF events. */
export class EventBus {
  constructor(readonly nc: NatsConnection) {}

  /** Publishes `event` on each subject (default: subject = type), serialising it once. */
  publish(event: AmfEvent, ...subjects: string[]): void {
    const bytes = encoder.encode(JSON.stringify(event));
    if (subjects.length === 0) {
      this.nc.publish(event.type, bytes);
      return;
    }
    for (const subject of subjects) this.nc.publish(subject, bytes);
  }

  /** Subscribes to `subject`; handler errors are caught and logged so one bad event cannot stop delivery. */
  subscribe(subject: string, handler: EventHandler, options: SubscribeOptions = {}): Subscription {
    const subOpts: {
      queue?: string;
      callback: (err: Error | null, msg: { subject: string; data: Uint8Array }) => void;
    } = {
      callback: (err, msg) => {
        if (err) return;
        let parsed: unknown;
        try {
          parsed = JSON.parse(decoder.decode(msg.data));
        } catch (e) {
          options.onInvalid?.([`not JSON: ${(e as Error).message}`], msg.subject);
          return;
        }
        const result = validateEvent(parsed);
        if (!result.ok) {
          options.onInvalid?.(result.errors, msg.subject);
          return;
        }
        try {
          handler(result.value, msg.subject);
        } catch (e) {
          options.onInvalid?.([`handler failed: ${(e as Error).message}`], msg.subject);
        }
      },
    };
    if (options.queue) subOpts.queue = options.queue;
    return this.nc.subscribe(subject, subOpts);
  }

  /** Waits until the server has processed everything published so far. */
  flush(): Promise<void> {
    return this.nc.flush();
  }
}
