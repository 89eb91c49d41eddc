/**
 * Server-Sent Events of the fabric (`GET /events`). One NATS subscription to `amf.>` is opened while
 * at least one client listens and shared by all of them; each client has its own subject filter and
 * a bounded backlog, and a client that cannot keep up is disconnected rather than buffered forever.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { isValidSubjectPattern, subjectMatches } from '../events/subjects.js';
import { AmfError } from '../errors.js';

interface Client {
  res: ServerResponse;
  pattern: string;
}

const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
const KEEPALIVE_MS = 15_000;
const decoder = new TextDecoder();

export class EventStreamHub {
  private readonly clients = new Set<Client>();
  private sub: Subscription | undefined;
  private keepalive: NodeJS.Timeout | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly maxClients = 256,
  ) {}

  get clientCount(): number {
    return this.clients.size;
  }

  /** Serves one SSE client until it disconnects. */
  handle(req: IncomingMessage, res: ServerResponse, url: URL): void {
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
    if (this.clients.size >= this.maxClients)
      throw new AmfError('OVERLOADED', `too many event stream clients (${this.maxClients})`);
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write(': connected\n\n');
    const client: Client = { res, pattern: pattern === '>' ? 'amf.>' : pattern };
    this.clients.add(client);
    this.ensureSubscribed();
    req.on('close', () => this.remove(client));
  }

  private remove(client: Client): void {
    this.clients.delete(client);
    if (!client.res.writableEnded) client.res.end();
    if (this.clients.size === 0) {
      this.sub?.unsubscribe();
      this.sub = undefined;
      clearInterval(this.keepalive);
      this.keepalive = undefined;
    }
  }

  private ensureSubscribed(): void {
    if (this.sub) return;
    this.sub = this.nc.subscribe('amf.>', {
      callback: (err, msg) => {
        // Internal subjects and audit records (not CloudEvents; query them at /audit) are not streamed.
        if (err || msg.subject.startsWith('amf.internal.') || msg.subject.startsWith('amf.audit.')) return;
        let frame: string | undefined;
        for (const client of this.clients) {
          if (!subjectMatches(client.pattern, msg.subject)) continue;
          frame ??= `data: ${decoder.decode(msg.data).replace(/\n/g, '')}\n\n`;
          if (client.res.writableLength > MAX_BUFFERED_BYTES) {
            this.remove(client); // a stalled client is cut off instead of growing memory
            continue;
          }
          client.res.write(frame);
        }
      },
    });
    this.keepalive = setInterval(() => {
      for (const c of this.clients) c.res.write(': keepalive\n\n');
    }, KEEPALIVE_MS);
    this.keepalive.unref();
  }

  /** Ends every stream (shutdown). */
  close(): void {
    for (const c of [...this.clients]) this.remove(c);
  }
}
