/**
 * The one guarded fetch of AMF. Whoever supplies a URL we call (a remote agent's card, an MCP server
 * entry, an advertisement's `card=`, a model URL), the request goes through here: http(s) only, no
 * credentials in the URL, never a cloud metadata or link-local address, optionally only one host,
 * redirects refused, handed back or followed by hand with every hop checked again, an optional
 * timeout, and response bodies capped so a hostile or broken server cannot make us buffer without
 * bound. Callers differ only in options (see `GuardedFetchOptions`), not in code.
 *
 * Names are judged as names (hostRules is pure, DNS is not consulted): a name that resolves to a
 * refused address is not caught here. Callers that must pin the resolved address (AMP `reply_to`
 * delivery) resolve and check it themselves.
 */
import { AmfError, type AmfErrorCode } from '../errors.js';
import { readCappedText } from '../util/readCappedText.js';
import { canonicalHost, isNeverFetchedHost, sameHost } from './hostRules.js';

/** Why a guarded request was refused or cut; callers with their own error vocabulary map this. */
export type NetRefusal =
  'url_invalid' | 'host_refused' | 'host_mismatch' | 'redirect_refused' | 'too_large' | 'timeout';

const CODE: Record<NetRefusal, AmfErrorCode> = {
  url_invalid: 'INVALID_REQUEST',
  host_refused: 'INVALID_REQUEST',
  host_mismatch: 'INVALID_REQUEST',
  redirect_refused: 'UNAVAILABLE',
  too_large: 'PAYLOAD_TOO_LARGE',
  timeout: 'TIMEOUT',
};

/** An AmfError that also says which rule refused the request. */
export class NetError extends AmfError {
  constructor(
    readonly reason: NetRefusal,
    message: string,
  ) {
    super(CODE[reason], message);
  }
}

/** The host rules of `checkUrl`. */
export interface UrlRules {
  /** Names the URL in messages, e.g. `MCP server "files": URL` or `A2A agent "x" URL`. */
  what: string;
  /** When set, the only host the URL may name. */
  host?: string;
  /** Says in messages why `host` is the one allowed, e.g. `the host its card came from`. */
  hostRole?: string;
  /**
   * Whether all loopback names count as one host for the `host` rule (`localhost` = 127.0.0.1 = ::1).
   * Default true; false compares canonical hosts only.
   */
  loopbackIsOneHost?: boolean;
}

/** Parses and checks a URL we are about to call; throws NetError (INVALID_REQUEST) saying what is wrong. */
export function checkUrl(value: string | URL, rules: UrlRules): URL {
  const { what } = rules;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new NetError('url_invalid', `${what} "${String(value).slice(0, 100)}" does not parse`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new NetError('url_invalid', `${what} must be http(s), got ${url.protocol}`);
  if (url.username || url.password) throw new NetError('url_invalid', `${what} must not carry credentials`);
  if (isNeverFetchedHost(url.hostname))
    throw new NetError(
      'host_refused',
      `${what}: host ${url.hostname} is a cloud metadata or link-local address; refused`,
    );
  if (rules.host !== undefined) {
    const same =
      rules.loopbackIsOneHost === false
        ? canonicalHost(url.hostname) === canonicalHost(rules.host)
        : sameHost(url.hostname, rules.host);
    if (!same)
      throw new NetError(
        'host_mismatch',
        `${what}: ${url.hostname} is not ${rules.hostRole ?? 'the only host allowed'} (${rules.host}); refused`,
      );
  }
  return url;
}

/** Options of `guardedFetch` / `createGuardedFetch`. */
export interface GuardedFetchOptions {
  /** Names the target in messages, e.g. `MCP server "files"`, `A2A agent "weather"`, `model`. */
  what: string;
  /** When set, the only host requests (and redirect targets) may go to. */
  host?: string;
  /** See `UrlRules.hostRole`. */
  hostRole?: string;
  /** See `UrlRules.loopbackIsOneHost` (default true). */
  loopbackIsOneHost?: boolean;
  /**
   * What a 3xx answer does: `'refuse'` throws (default); `'return'` hands it to the caller unfollowed
   * (an SDK that follows it calls this fetch again, so each hop is checked); a number follows up to
   * that many redirects here, each target checked by the same rules.
   */
  redirects?: 'refuse' | 'return' | number;
  /** Time allowed for the whole exchange, body included when `buffer` is set. */
  timeoutMs?: number;
  /** Cancels the request (combined with the request's own signal and the timeout). */
  signal?: AbortSignal;
  /** Cap of a response body in bytes; unset means bodies are not capped. */
  maxBytes?: number;
  /**
   * Cap of `text/event-stream` bodies, which a long-lived stream may use for many messages:
   * `'per-event'` applies `maxBytes` to each SSE event (default), a number caps the whole stream,
   * `'none'` passes streams through (the consumer bounds each event itself).
   */
  streamCap?: 'per-event' | 'none' | number;
  /**
   * Read non-stream bodies fully (under the cap) before answering, so an oversize body fails the
   * fetch itself instead of a later read. Otherwise bodies are wrapped and error while streaming.
   */
  buffer?: boolean;
  /** Headers added to every request unless the request sets them. */
  headers?: Record<string, string>;
  /**
   * Told when a body breaks the cap. An SDK may treat a broken SSE stream as a reason to reconnect,
   * so a caller that wants to drop the peer instead needs to hear about it.
   */
  onOversize?: (err: NetError) => void;
  /** The fetch to wrap (default: global fetch). */
  fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
}

/** A fetch with the guard applied. */
export type GuardedFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

// The Response constructor refuses a body for these statuses, so they are never re-wrapped.
const NULL_BODY = new Set([101, 204, 205, 304]);

function isEventStream(res: Response): boolean {
  return (res.headers.get('content-type') ?? '').toLowerCase().includes('text/event-stream');
}

/**
 * Wraps a body so it errors once it carries more than `maxBytes`: with `perEvent` the count restarts
 * at each blank line (an SSE event boundary), else it is the whole body.
 */
function capBody(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  perEvent: boolean,
  tooLarge: () => NetError,
): ReadableStream<Uint8Array> {
  let count = 0;
  let atLineStart = false;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        let over = false;
        if (!perEvent) over = (count += chunk.byteLength) > maxBytes;
        else
          for (const byte of chunk) {
            if (byte === 0x0a) {
              // "\n\n" (or "\n\r\n") ends an SSE event: the next event starts a fresh count.
              if (atLineStart) count = 0;
              atLineStart = true;
            } else if (byte !== 0x0d) {
              atLineStart = false;
              // Checked per byte: a whole oversize event (blank line included) may come in one chunk.
              if (++count > maxBytes) over = true;
            }
          }
        if (over) {
          controller.error(tooLarge());
          return;
        }
        controller.enqueue(chunk);
      },
    }),
  );
}

/** Applies the size cap to one response. */
async function capResponse(res: Response, options: GuardedFetchOptions): Promise<Response> {
  const maxBytes = options.maxBytes;
  if (maxBytes === undefined || !res.body || NULL_BODY.has(res.status)) return res;
  const stream = isEventStream(res);
  const streamCap = options.streamCap ?? 'per-event';
  if (stream && streamCap === 'none') return res;
  const limit = stream && typeof streamCap === 'number' ? streamCap : maxBytes;
  const noun = stream ? (streamCap === 'per-event' ? 'message' : 'stream') : 'response';
  const tooLarge = (declared?: number): NetError => {
    const err = new NetError(
      'too_large',
      `${options.what}: ${noun} larger than ${limit} bytes refused` +
        (declared !== undefined ? ` (it declares ${declared})` : ''),
    );
    options.onOversize?.(err);
    return err;
  };
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) {
    await res.body.cancel().catch(() => undefined);
    throw tooLarge(declared);
  }
  const init = { status: res.status, statusText: res.statusText, headers: res.headers };
  if (options.buffer && !stream) {
    const read = await readCappedText(res, limit);
    if (!read.ok) throw tooLarge(read.declaredBytes);
    return new Response(read.text, init);
  }
  return new Response(
    capBody(res.body, limit, stream && streamCap === 'per-event', () => tooLarge()),
    init,
  );
}

/** The request of the next redirect hop: 303 (and 301/302 after a POST) become a GET without body. */
function redirectInit(status: number, init: RequestInit): RequestInit {
  const method = (init.method ?? 'GET').toUpperCase();
  if (status === 303 || ((status === 301 || status === 302) && method === 'POST')) {
    const next: RequestInit = { ...init, method: 'GET' };
    delete next.body;
    return next;
  }
  return init;
}

/** One guarded request (see the module comment); `options` decide the policy. */
export async function guardedFetch(
  input: string | URL | Request,
  init: RequestInit | undefined,
  options: GuardedFetchOptions,
): Promise<Response> {
  const rules: UrlRules = {
    what: `${options.what} URL`,
    ...(options.host !== undefined ? { host: options.host } : {}),
    ...(options.hostRole !== undefined ? { hostRole: options.hostRole } : {}),
    ...(options.loopbackIsOneHost !== undefined ? { loopbackIsOneHost: options.loopbackIsOneHost } : {}),
  };
  let url = checkUrl(input instanceof Request ? input.url : input, rules);
  const base = options.fetch ?? fetch;
  const timeout = options.timeoutMs !== undefined ? AbortSignal.timeout(options.timeoutMs) : undefined;
  const signals = [timeout, options.signal, init?.signal ?? undefined].filter(
    (s): s is AbortSignal => s !== undefined,
  );
  const headers = new Headers(init?.headers);
  for (const [k, v] of Object.entries(options.headers ?? {})) if (!headers.has(k)) headers.set(k, v);
  const redirects = options.redirects ?? 'refuse';
  // 'return' keeps an explicit redirect: 'error' of the caller; everything else is handled here.
  const redirect: RequestInit['redirect'] =
    redirects === 'return' && init?.redirect === 'error' ? 'error' : 'manual';
  let request: RequestInit = {
    ...init,
    headers,
    redirect,
    ...(signals.length > 0 ? { signal: signals.length === 1 ? signals[0]! : AbortSignal.any(signals) } : {}),
  };
  let target: string | URL | Request = input instanceof Request ? input : url;
  try {
    for (let hop = 0; ; hop++) {
      const res = await base(target, request);
      if (res.status < 300 || res.status >= 400 || redirects === 'return')
        return await capResponse(res, options);
      await res.body?.cancel().catch(() => undefined);
      if (redirects === 'refuse')
        throw new NetError(
          'redirect_refused',
          `${options.what} answered a redirect (HTTP ${res.status}); redirects are not followed`,
        );
      const location = res.headers.get('location');
      if (!location || hop >= redirects)
        throw new NetError(
          'redirect_refused',
          `${options.what}: ${location ? `more than ${redirects} redirects` : 'redirect without a Location'}; refused`,
        );
      let next: string;
      try {
        next = new URL(location, url).href;
      } catch {
        throw new NetError('redirect_refused', `${options.what}: redirect Location does not parse; refused`);
      }
      try {
        url = checkUrl(next, rules);
      } catch (err) {
        // A target refused in itself (metadata, bad scheme) keeps its reason; one that is merely
        // another host is a refused redirect.
        if (err instanceof NetError && err.reason === 'host_mismatch')
          throw new NetError('redirect_refused', `${options.what}: redirect refused: ${err.message}`);
        throw err;
      }
      request = redirectInit(res.status, request);
      target = url;
    }
  } catch (err) {
    if (timeout?.aborted && !(err instanceof NetError))
      throw new NetError('timeout', `${options.what} took longer than ${options.timeoutMs} ms`);
    throw err;
  }
}

/** A fetch (for SDK transports) that applies `options` to every request. */
export function createGuardedFetch(options: GuardedFetchOptions): GuardedFetch {
  return (input, init) => guardedFetch(input, init, options);
}
