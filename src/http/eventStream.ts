/**
 * Server-Sent Events of the fabric (`GET /events`). One NATS subscription to `amf.>` is opened while
 * at least one client listens and shared by all of them; each client has its own subject filter.
 *
 * Memory is bounded whatever clients do: at most `maxClients` streams at once (one more gets 503
 * with Retry-After), and no client ever has more than `maxBufferedBytes` waiting unsent in this
 * process. A frame that would take a client past that cap disconnects it instead (counted in
 * `dropped`), so what the hub holds is at most `maxClients × maxBufferedBytes`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { isValidSubjectPattern, subjectMatches } from '../events/subjects.js';
import { AmfError } from '../errors.js';

interface Client {
  res: ServerResponse;
  pattern: string;
  /** Set once the stream has answered; events before that are not the client's to see. */
  answered: boolean;
}

/** Limits of an {@link EventStreamHub} (`http.sse_max_clients`, `http.sse_max_buffered_bytes`). */
export interface EventStreamLimits {
  maxClients: number;
  maxBufferedBytes: number;
}

export const DEFAULT_EVENT_STREAM_LIMITS: EventStreamLimits = {
  maxClients: 256,
  maxBufferedBytes: 1024 * 1024,
};

const KEEPALIVE_MS = 15_000;
// What a refused client is told to wait: streams end when their clients go, so a slot frees soon.
const RETRY_AFTER_SECONDS = 5;
const KEEPALIVE_FRAME = ': keepalive\n\n';
/** The last frame of every stream when the coordinator stops, so a client can tell that from a cut. */
export const CLOSING_FRAME = ': closing: the coordinator is stopping\n\n';

/**
 * Subjects under `amf.>` that carry no event of their own: internal traffic, audit records (not
 * CloudEvents; query them at /audit) and the work queue. A work-queue message (`amf.work.<tag>`,
 * events/subjects.ts workSubject) holds the very bytes of the task's `amf.task.announce.<tag>`:
 * streaming it too showed every announcement twice, with one event id.
 */
const NOT_EVENTS = ['amf.internal.', 'amf.audit.', 'amf.work.'] as const;

function isStreamedSubject(subject: string): boolean {
  return !NOT_EVENTS.some((prefix) => subject.startsWith(prefix));
}
const decoder = new TextDecoder();

export class EventStreamHub {
  private readonly clients = new Set<Client>();
  private sub: Subscription | undefined;
  private keepalive: NodeJS.Timeout | undefined;
  private droppedCount = 0;
  private refusedCount = 0;
  private readonly limits: EventStreamLimits;

  constructor(
    private readonly nc: NatsConnection,
    limits: Partial<EventStreamLimits> = {},
  ) {
    this.limits = { ...DEFAULT_EVENT_STREAM_LIMITS, ...limits };
  }

  /** Streams open now. */
  get clientCount(): number {
    return this.clients.size;
  }

  /** Clients disconnected since start because they stopped reading (their backlog reached the cap). */
  get dropped(): number {
    return this.droppedCount;
  }

  /** Connections refused since start because `maxClients` streams were open. */
  get refused(): number {
    return this.refusedCount;
  }

  get maxClients(): number {
    return this.limits.maxClients;
  }

  get maxBufferedBytes(): number {
    return this.limits.maxBufferedBytes;
  }

  /**
   * Serves one SSE client until it disconnects. The stream answers only once the subscription is in
   * place on the NATS server, so every event published after a client sees the answer reaches it.
   */
  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const pattern = url.searchParams.get('subject') ?? 'amf.>';
    if (!isValidSubjectPattern(pattern))
      throw new AmfError(
        'INVALID_REQUEST',
        `invalid subject filter "${pattern}": expected a NATS subject pattern such as amf.task.>`,
      );
    if (!pattern.startsWith('amf.') && pattern !== '>')
      throw new AmfError('INVALID_REQUEST', `subject filter must be within amf.> (got "${pattern}")`);
    if (pattern.startsWith('amf.internal'))
      throw new AmfError('INVALID_REQUEST', 'internal subjects (amf.internal.>) are not streamed');
    if (pattern.startsWith('amf.work.') || pattern === 'amf.work')
      throw new AmfError(
        'INVALID_REQUEST',
        'the work queue (amf.work.>) holds copies of task announcements, not events: use amf.task.announce.>',
      );
    if (this.clients.size >= this.limits.maxClients) {
      this.refusedCount += 1;
      res.setHeader('retry-after', String(RETRY_AFTER_SECONDS));
      throw new AmfError(
        'OVERLOADED',
        `too many event stream clients (${this.limits.maxClients}, http.sse_max_clients): retry after ${RETRY_AFTER_SECONDS} s`,
        { retry_after_seconds: RETRY_AFTER_SECONDS },
      );
    }
    const client: Client = { res, pattern: pattern === '>' ? 'amf.>' : pattern, answered: false };
    this.clients.add(client);
    req.on('close', () => this.remove(client));
    this.ensureSubscribed();
    try {
      await this.nc.flush();
    } catch (err) {
      this.remove(client);
      throw err;
    }
    if (!this.clients.has(client)) return;
    client.answered = true;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write(': connected\n\n');
  }

  private remove(client: Client): void {
    if (!this.clients.delete(client)) return;
    if (!client.res.writableEnded && !client.res.destroyed) client.res.end();
    if (this.clients.size === 0) {
      this.sub?.unsubscribe();
      this.sub = undefined;
      clearInterval(this.keepalive);
      this.keepalive = undefined;
    }
  }

  /**
   * Writes `frame` unless that would leave more than the cap waiting for this client; then the client
   * is cut off. The socket is reset rather than ended: end() would keep the backlog (in this process
   * and in the kernel) until a client that stopped reading reads it, which it may never do.
   */
  private send(client: Client, frame: string, bytes: number): void {
    const res = client.res;
    if (res.writableLength + bytes <= this.limits.maxBufferedBytes) {
      res.write(frame);
      return;
    }
    this.droppedCount += 1;
    const socket = res.socket;
    if (socket && !socket.destroyed) socket.resetAndDestroy();
    else res.destroy();
    this.remove(client);
  }

  private ensureSubscribed(): void {
    if (this.sub) return;
    this.sub = this.nc.subscribe('amf.>', {
      callback: (err, msg) => {
        if (err || !isStreamedSubject(msg.subject)) return;
        let frame: string | undefined;
        let bytes = 0;
        for (const client of [...this.clients]) {
          if (!client.answered || !subjectMatches(client.pattern, msg.subject)) continue;
          if (frame === undefined) {
            // SSE frames are text; a newline inside the JSON would end the data line early.
            frame = `data: ${decoder.decode(msg.data).replace(/\n/g, '')}\n\n`;
            bytes = Buffer.byteLength(frame);
            // An event bigger than a client's whole allowance could never be sent within the bound,
            // so every client gets a comment naming it instead (EventSource ignores comments).
            if (bytes > this.limits.maxBufferedBytes) {
              frame = `: event on ${msg.subject} not streamed: ${bytes} bytes exceeds http.sse_max_buffered_bytes (${this.limits.maxBufferedBytes})\n\n`;
              bytes = Buffer.byteLength(frame);
            }
          }
          this.send(client, frame, bytes);
        }
      },
    });
    this.keepalive = setInterval(() => {
      for (const c of [...this.clients])
        if (c.answered) this.send(c, KEEPALIVE_FRAME, KEEPALIVE_FRAME.length);
    }, KEEPALIVE_MS);
    this.keepalive.unref();
  }

  /** Ends every stream (shutdown), each with {@link CLOSING_FRAME} so its client knows why. */
  close(): void {
    for (const c of [...this.clients]) {
      if (c.answered && !c.res.writableEnded && !c.res.destroyed) c.res.write(CLOSING_FRAME);
      this.remove(c);
    }
  }
}
