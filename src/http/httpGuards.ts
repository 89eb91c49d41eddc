/**
 * Guards of the coordinator's HTTP edge, run before routing: GCRA rate limiting per client address
 * and a request size check on the declared body length. Each route family refuses in its own
 * protocol's shape, so a client library sees an error it understands: JSON-RPC for `/a2a` and `/mcp`
 * (details as `google.rpc.ErrorInfo`, A2A §9.5), `google.rpc.Status` for A2A's REST binding,
 * OpenAI's error for `/v1`, the Fabric envelope for `/mcp/call`, an AMP response for `/api/amp`, and
 * AMF's `{error: {code, message}}` elsewhere. The codes and bodies come from wireErrors.ts; the three
 * shapes an adapter owns (OpenAI, Fabric, AMP) are handed in by the composition root, since http/
 * imports no adapter. Body readers still cap what they read (a chunked body declares no length), so
 * the declared-length check is the early, cheap refusal.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AmfError, toAmfError } from '../errors.js';
import { GcraLimiter } from '../util/gcraLimiter.js';
import type { AmfConfig } from '../config/config.js';
import { sendError, sendJson } from './httpKit.js';
import { googleRpcStatusBody, httpStatusFor, jsonRpcErrorBody } from './wireErrors.js';

/** The protocol a path belongs to, which decides the shape of its errors. */
export type RouteFamily = 'jsonrpc' | 'a2a-rest' | 'openai' | 'fabric' | 'amp' | 'amf';

/** The route family of `pathname`. */
export function routeFamily(pathname: string): RouteFamily {
  if (pathname === '/mcp/call') return 'fabric';
  if (pathname === '/a2a/rest' || pathname.startsWith('/a2a/rest/')) return 'a2a-rest';
  if (pathname === '/mcp' || pathname === '/a2a' || pathname.startsWith('/a2a/')) return 'jsonrpc';
  if (pathname.startsWith('/v1/')) return 'openai';
  if (pathname.startsWith('/api/amp/') || pathname === '/api/amp') return 'amp';
  return 'amf';
}

/** Sends an error in one adapter's own shape, status included. */
export type ErrorShape = (res: ServerResponse, err: AmfError) => void;

/** The route families whose error shape an adapter defines. */
export type AdapterErrorShapes = Readonly<Record<'openai' | 'fabric' | 'amp', ErrorShape>>;

/**
 * Sends `err` in the error shape of the route family of `pathname`, with the HTTP status of its AMF
 * code. Headers set on `res` before (e.g. Retry-After) go out with it.
 */
export function sendFamilyError(
  res: ServerResponse,
  pathname: string,
  err: unknown,
  shapes: AdapterErrorShapes,
): void {
  const e = toAmfError(err);
  if (res.headersSent) {
    res.end();
    return;
  }
  const family = routeFamily(pathname);
  switch (family) {
    case 'openai':
    case 'fabric':
    case 'amp':
      shapes[family](res, e);
      return;
    case 'jsonrpc':
      sendJson(res, httpStatusFor(e.code), jsonRpcErrorBody(e, { withInfo: true }));
      return;
    case 'a2a-rest':
      sendJson(res, httpStatusFor(e.code), googleRpcStatusBody(e));
      return;
    default:
      sendError(res, e);
  }
}

/** The client a request is counted against: its remote address (IPv4-mapped IPv6 folded). */
export function clientKey(req: IncomingMessage): string {
  const addr = req.socket.remoteAddress ?? 'unknown';
  return addr.startsWith('::ffff:') ? addr.slice(7) : addr;
}

/** Options of the edge guard (from `config.http`, plus per-route body caps). */
export interface HttpGuardOptions {
  rateLimitPerSecond: number;
  rateLimitBurst: number;
  /** Body cap of a path (the routes' own caps: /v1, /publish, ...; else the general one). */
  bodyLimitFor: (pathname: string) => number;
  /** How the adapters' route families refuse. */
  shapes: AdapterErrorShapes;
  now?: () => number;
}

/** Body caps per route, as the routes themselves read them. */
export function bodyLimits(config: AmfConfig): (pathname: string) => number {
  return (pathname) => {
    if (pathname.startsWith('/v1/')) return config.openai.maxBodyBytes;
    if (pathname === '/publish') return config.tasks.maxTaskBytes;
    return config.http.maxBodyBytes;
  };
}

/** Rate limit and declared-size check, before authentication and routing. */
export class HttpGuard {
  private readonly limiter: GcraLimiter | undefined;

  constructor(private readonly options: HttpGuardOptions) {
    if (options.rateLimitPerSecond > 0)
      this.limiter = new GcraLimiter({
        ratePerSecond: options.rateLimitPerSecond,
        burst: options.rateLimitBurst,
        ...(options.now ? { now: options.now } : {}),
      });
  }

  /** Builds the guard from the coordinator's configuration. */
  static fromConfig(config: AmfConfig, shapes: AdapterErrorShapes): HttpGuard {
    return new HttpGuard({
      rateLimitPerSecond: config.http.rateLimitPerSecond,
      rateLimitBurst: config.http.rateLimitBurst,
      bodyLimitFor: bodyLimits(config),
      shapes,
    });
  }

  /**
   * True when the request may go on; otherwise the refusal (429 with Retry-After, or 413) has been
   * sent in the route family's shape and the request body is drained.
   */
  admit(req: IncomingMessage, res: ServerResponse, url: URL): boolean {
    if (this.limiter) {
      const key = clientKey(req);
      if (!this.limiter.allow(key)) {
        const seconds = Math.max(1, Math.ceil(this.limiter.retryAfterMs(key) / 1000));
        res.setHeader('retry-after', String(seconds));
        this.refuse(
          req,
          res,
          url,
          new AmfError('RATE_LIMITED', `too many requests from ${key}: retry after ${seconds} s`, {
            retry_after_seconds: seconds,
          }),
        );
        return false;
      }
    }
    const declared = Number(req.headers['content-length']);
    const limit = this.options.bodyLimitFor(url.pathname);
    if (Number.isFinite(declared) && declared > limit) {
      this.refuse(
        req,
        res,
        url,
        new AmfError(
          'PAYLOAD_TOO_LARGE',
          `request body of ${declared} bytes exceeds the limit of ${limit} bytes`,
        ),
      );
      return false;
    }
    return true;
  }

  private refuse(req: IncomingMessage, res: ServerResponse, url: URL, err: AmfError): void {
    // The body is not wanted; close the connection after answering so a large upload stops.
    req.resume();
    res.setHeader('connection', 'close');
    sendFamilyError(res, url.pathname, err, this.options.shapes);
  }
}
