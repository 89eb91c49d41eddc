/**
 * The SSE event store of one MCP session (the SDK transport's `eventStore`), which is what turns on
 * SEP-1699 in the SDK: every SSE event carries an id, POST streams begin with a priming event (id,
 * `retry`, empty data), and a client whose stream broke resumes with `GET` + `Last-Event-ID` and
 * gets what it missed. A server may then also end a stream early on purpose (`closeSSEStream`) and
 * let the client poll.
 *
 * Only a short window is kept: resuming is what a client does within its `retry` delay, not a
 * history. A session keeps at most {@link MAX_EVENTS} events and {@link MAX_BYTES} of them (the
 * newest one always, whatever its size), none older than {@link MAX_AGE_MS}; an id older than the
 * window is unknown, and the SDK answers its resume as it answers any unknown id.
 */
import type { EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { AmfError } from '../../../errors.js';

/** Most events one session keeps for resumption. */
export const MAX_EVENTS = 64;
/** Most bytes (of JSON) one session keeps for resumption, besides its newest event. */
export const MAX_BYTES = 256 * 1024;
/** Events older than this are forgotten. */
export const MAX_AGE_MS = 60_000;

/**
 * The stream id the SDK (1.32.2) gives a session's standalone `GET` stream. Not exported by the SDK;
 * the endpoint primes that stream itself (the SDK primes POST streams only), and
 * test/mcp/mcpSsePolling.test.ts checks that a resume from that priming id still works.
 */
export const STANDALONE_STREAM_ID = '_GET_stream';

interface StoredEvent {
  id: string;
  streamId: string;
  message: JSONRPCMessage | Record<string, never>;
  bytes: number;
  at: number;
}

/** A bounded, in-memory event store for one session. */
export class SessionEventStore implements EventStore {
  private readonly events: StoredEvent[] = [];
  private bytes = 0;
  private seq = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** Number of events kept (for tests). */
  get size(): number {
    return this.events.length;
  }

  storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    return Promise.resolve(this.store(streamId, message));
  }

  /** Stores the empty event that primes a stream; returns its id. */
  prime(streamId: string): string {
    return this.store(streamId, {});
  }

  getStreamIdForEventId(eventId: string): Promise<string | undefined> {
    return Promise.resolve(this.find(eventId)?.streamId);
  }

  async replayEventsAfter(
    lastEventId: string,
    { send }: { send: (eventId: string, message: JSONRPCMessage) => Promise<void> },
  ): Promise<string> {
    this.prune();
    const index = this.events.findIndex((e) => e.id === lastEventId);
    // The SDK maps an unknown id through getStreamIdForEventId first and refuses it there.
    if (index < 0) throw new AmfError('NOT_FOUND', `event ${lastEventId} is not (or no longer) stored`);
    const streamId = this.events[index]!.streamId;
    for (const event of this.events.slice(index + 1)) {
      // Priming events carry no message: nothing to replay.
      if (event.streamId === streamId && 'jsonrpc' in event.message)
        await send(event.id, event.message as JSONRPCMessage);
    }
    return streamId;
  }

  /** Forgets events beyond the window (also called on every store and lookup). */
  prune(): void {
    const cutoff = this.now() - MAX_AGE_MS;
    while (this.events.length > 0) {
      const oldest = this.events[0]!;
      const newest = this.events.at(-1)!;
      const over =
        this.events.length > MAX_EVENTS || (oldest !== newest && this.bytes - newest.bytes > MAX_BYTES);
      if (!over && oldest.at >= cutoff) break;
      this.events.shift();
      this.bytes -= oldest.bytes;
    }
  }

  private store(streamId: string, message: JSONRPCMessage | Record<string, never>): string {
    // The stream id in the event id: readable in a trace, and unique across the session's streams.
    const id = `${streamId}.${++this.seq}`;
    const bytes = JSON.stringify(message).length;
    this.events.push({ id, streamId, message, bytes, at: this.now() });
    this.bytes += bytes;
    this.prune();
    return id;
  }

  private find(eventId: string): StoredEvent | undefined {
    this.prune();
    return this.events.find((e) => e.id === eventId);
  }
}
