/**
 * A minimal HTTP toolkit on node:http: bounded body reading, JSON replies, and an exact-path router.
 * The coordinator and worker runtimes stay free of framework types; this is the only HTTP edge.
 */
import type { IncomingMessage, ServerOptions, ServerResponse } from 'node:http';
import { AmfError, toAmfError } from '../errors.js';
import { amfErrorBody, httpStatusFor } from './wireErrors.js';

export type RouteHandler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void> | void;

/** Reads the request body, refusing more than `limit` bytes with PAYLOAD_TOO_LARGE. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      req.resume();
      reject(
        new AmfError(
          'PAYLOAD_TOO_LARGE',
          `request body of ${declared} bytes exceeds the limit of ${limit} bytes`,
        ),
      );
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(new AmfError('PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    req.on('error', (err) =>
      reject(
        new AmfError('INVALID_REQUEST', `could not read request body: ${err.message}`, undefined, {
          cause: err,
        }),
      ),
    );
  });
}

/** Reads and parses a JSON object body; errors say what was wrong. */
export async function readJsonObject(req: IncomingMessage, limit: number): Promise<Record<string, unknown>> {
  const body = await readBody(req, limit);
  if (body.length === 0)
    throw new AmfError('INVALID_REQUEST', 'request body is empty: expected a JSON object');
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new AmfError(
      'INVALID_REQUEST',
      `request body is not valid JSON: ${(err as Error).message}`,
      undefined,
      { cause: err },
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new AmfError('INVALID_REQUEST', 'request body must be a JSON object');
  return value as Record<string, unknown>;
}

/** Sends a JSON reply. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** Sends an AMF error as `{error: {code, message}}` with its HTTP status. */
export function sendError(res: ServerResponse, err: unknown): void {
  const e = toAmfError(err);
  if (res.headersSent) {
    res.end();
    return;
  }
  sendJson(res, httpStatusFor(e.code), amfErrorBody(e));
}

interface Route {
  method: string;
  path: string;
  handler: RouteHandler;
}

/** Exact-path router with prefix routes for sub-trees (`/api/amp/jobs/`). */
export class Router {
  private readonly exact = new Map<string, Map<string, RouteHandler>>();
  private readonly prefixes: Route[] = [];

  on(method: string, path: string, handler: RouteHandler): this {
    let byMethod = this.exact.get(path);
    if (!byMethod) this.exact.set(path, (byMethod = new Map()));
    byMethod.set(method, handler);
    return this;
  }

  onPrefix(method: string, prefix: string, handler: RouteHandler): this {
    this.prefixes.push({ method, path: prefix, handler });
    return this;
  }

  /** Handles a request; 404 for unknown paths, 405 with Allow for known paths and other methods. */
  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const method = req.method ?? 'GET';
    const byMethod = this.exact.get(url.pathname);
    if (byMethod) {
      const handler = byMethod.get(method) ?? (method === 'HEAD' ? byMethod.get('GET') : undefined);
      if (!handler) {
        res.setHeader('allow', [...byMethod.keys()].join(', '));
        sendJson(res, 405, {
          error: { code: 'METHOD_NOT_ALLOWED', message: `${method} is not allowed on ${url.pathname}` },
        });
        return;
      }
      await handler(req, res, url);
      return;
    }
    for (const route of this.prefixes) {
      if (route.method === method && url.pathname.startsWith(route.path)) {
        await route.handler(req, res, url);
        return;
      }
    }
    sendJson(res, 404, { error: { code: 'NOT_FOUND', message: `no route for ${method} ${url.pathname}` } });
  }
}

/**
 * Decodes one percent-encoded path segment (an id in `/tasks/{id}`). A malformed escape such as
 * `%ZZ` is the client's mistake, so it is an INVALID_REQUEST (400), not the URIError a bare
 * decodeURIComponent would throw into a 500.
 */
export function decodePathSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch (err) {
    throw new AmfError(
      'INVALID_REQUEST',
      `the path segment "${segment.slice(0, 64)}" is not valid percent-encoding (escape "%" as %25)`,
      undefined,
      { cause: err },
    );
  }
}

/** Parses the request URL safely (a malformed Host header must not crash the server). */
export function requestUrl(req: IncomingMessage): URL {
  try {
    return new URL(req.url ?? '/', 'http://localhost');
  } catch {
    return new URL('/', 'http://localhost');
  }
}

/** How long a client may take to send a request (`http.headers_timeout_seconds`, `http.body_timeout_seconds`). */
export interface RequestDeadlines {
  headersTimeoutMs: number;
  /** The whole request, headers and body. */
  bodyTimeoutMs: number;
}

export const DEFAULT_REQUEST_DEADLINES: RequestDeadlines = {
  headersTimeoutMs: 10_000,
  bodyTimeoutMs: 30_000,
};

/**
 * Server options that cut off clients which send headers or a body too slowly (slowloris, a stalled
 * upload): Node answers 408 Request Timeout while no response has started, and closes the
 * connection either way, so a stalled request holds no socket, parser or body buffer for longer
 * than the deadline. The deadlines cover receiving the request only; a long response (SSE, a slow
 * task) is not affected. Node checks them every `connectionsCheckingInterval`, so that interval is
 * kept a fraction of the shortest deadline (at most 1 s, a cheap walk of the open connections).
 */
export function requestDeadlineOptions(d: RequestDeadlines = DEFAULT_REQUEST_DEADLINES): ServerOptions {
  const requestTimeout = Math.max(1, Math.round(d.bodyTimeoutMs));
  // Node refuses a headers deadline longer than the whole request's.
  const headersTimeout = Math.min(Math.max(1, Math.round(d.headersTimeoutMs)), requestTimeout);
  return {
    requestTimeout,
    headersTimeout,
    connectionsCheckingInterval: Math.min(1000, Math.max(25, Math.floor(headersTimeout / 4))),
  };
}
