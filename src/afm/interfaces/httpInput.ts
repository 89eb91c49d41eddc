/**
 * Shared edge helpers of the AFM HTTP interfaces: media types, turning a body into a signature input,
 * SSE framing, and abort-on-disconnect.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AmfError, toAmfError } from '../../errors.js';
import type { CompiledSignature } from './signature.js';
import type { Logger } from '../../log.js';

/** The media type of a request without parameters, lower case ("" when absent). */
export function mediaType(req: IncomingMessage): string {
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
}

/** Parses JSON with an error that says so. */
export function parseJsonBody(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new AmfError(
      'INVALID_REQUEST',
      `request body is not valid JSON: ${(err as Error).message}`,
      undefined,
      {
        cause: err,
      },
    );
  }
}

/**
 * The signature input of a chat request. A string input may come as text/plain (or without a content
 * type) or as a JSON string; any other input must be application/json.
 */
export function chatInput(req: IncomingMessage, body: Buffer, sig: CompiledSignature): unknown {
  if (body.length === 0) throw new AmfError('INVALID_REQUEST', 'request body is empty: expected the input');
  const type = mediaType(req);
  let input: unknown;
  if (sig.stringInput && (type === '' || type === 'text/plain')) input = body.toString('utf8');
  else if (type === 'application/json') input = parseJsonBody(body);
  else
    throw new AmfError(
      'INVALID_REQUEST',
      sig.stringInput
        ? `unsupported Content-Type "${type}": send text/plain or a JSON string as application/json`
        : `unsupported Content-Type "${type || '(none)'}": this agent's input is structured, send application/json`,
    );
  if (sig.stringInput && typeof input !== 'string')
    throw new AmfError('INVALID_REQUEST', 'expected a string input (text/plain, or a JSON string)');
  if (typeof input === 'string' && input.trim() === '')
    throw new AmfError('INVALID_REQUEST', 'input is empty: expected a message');
  sig.checkInput(input);
  return input;
}

/** True when the client asked for Server-Sent Events. */
export function wantsEventStream(req: IncomingMessage): boolean {
  return (req.headers.accept ?? '').toLowerCase().includes('text/event-stream');
}

/** An AbortSignal that fires when the client goes away before the answer was sent. */
export function abortOnDisconnect(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort(new AmfError('UNAVAILABLE', 'client disconnected'));
  });
  return controller.signal;
}

/** A Server-Sent Events writer that gives up on a client that stops reading. */
export class SseWriter {
  private static readonly MAX_BUFFERED = 1024 * 1024;

  constructor(private readonly res: ServerResponse) {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
    });
  }

  send(event: string, data: unknown): void {
    if (this.res.writableEnded || this.res.destroyed) return;
    if (this.res.writableLength > SseWriter.MAX_BUFFERED) {
      this.res.destroy(); // the client is not reading: drop it rather than buffer without end
      return;
    }
    this.res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  end(): void {
    if (!this.res.writableEnded) this.res.end();
  }
}

/**
 * An agent failure as HTTP clients see it. A model provider failure carries the model server's URL
 * (in its details and message): that describes the deployment, so clients get the provider and HTTP
 * status only and the whole error goes to the log.
 */
export function publicAgentError(err: unknown, log?: Logger): AmfError {
  const e = toAmfError(err);
  if (e.code === 'INVALID_REQUEST' || e.details === undefined) return e;
  const { provider, status } = e.details as { provider?: unknown; status?: unknown };
  if (typeof provider !== 'string') return new AmfError(e.code, e.message);
  log?.error({ err: e.message, code: e.code }, 'agent model call failed');
  const http = typeof status === 'number' ? ` (HTTP ${status})` : '';
  return new AmfError(
    e.code,
    `the agent's model (${provider}) failed${http}; details are in the agent's log`,
  );
}
