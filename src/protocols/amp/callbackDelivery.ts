/**
 * Delivery of deferred AMP responses to a sender's `reply_to` URL without becoming an SSRF gadget:
 * http(s) only, no credentials, never a link-local, cloud metadata, unspecified, multicast or broadcast
 * address; loopback and private addresses only when allowed (by default when the coordinator itself
 * listens on loopback, where every caller is local anyway). The host is resolved once, every address
 * it resolves to is checked, and the connection goes to the checked address (no DNS rebinding between
 * check and connect). No redirects are followed; the reply body is read up to 64 KiB and discarded;
 * each attempt has a timeout and failed attempts are retried with backoff.
 */
import { lookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { AmfError } from '../../errors.js';
import { bareHost, hostKind, isMetadataHost } from '../../net/hostRules.js';

/** Where callbacks may go. */
export interface CallbackPolicy {
  /** Allow loopback and private (RFC 1918, ULA, CGNAT) targets. */
  allowPrivate: boolean;
}

/** Why an address may not be called back, or undefined when it may. */
export function addressRefusal(address: string, policy: CallbackPolicy): string | undefined {
  if (isIP(bareHost(address)) === 0) return `${address} is not an IP address`;
  // hostRules judges the address (IPv4-mapped IPv6 as the IPv4 it reaches).
  const kind = hostKind(address);
  if (
    kind === 'metadata' ||
    kind === 'link-local' ||
    kind === 'unspecified' ||
    kind === 'multicast' ||
    kind === 'reserved'
  )
    return `${address} is a link-local, metadata, unspecified or multicast address`;
  if (!policy.allowPrivate && (kind === 'loopback' || kind === 'private'))
    return `${address} is a loopback or private address (allowed only when the coordinator listens on loopback or http.allow_private_callbacks is set)`;
  return undefined;
}

/** A checked callback target: the URL and the address to connect to. */
export interface CallbackTarget {
  url: URL;
  address: string;
  family: 4 | 6;
}

/** Parses, resolves and checks a callback URL; throws INVALID_REQUEST saying what was refused. */
export async function resolveCallback(value: string, policy: CallbackPolicy): Promise<CallbackTarget> {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new AmfError('INVALID_REQUEST', 'reply_to is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new AmfError('INVALID_REQUEST', 'reply_to must be an http(s) URL');
  if (url.username || url.password)
    throw new AmfError('INVALID_REQUEST', 'reply_to must not carry credentials');
  const host = bareHost(url.hostname);
  if (isMetadataHost(host) && isIP(host) === 0)
    throw new AmfError('INVALID_REQUEST', `reply_to host ${host} is a metadata host`);
  let addresses: Array<{ address: string; family: number }>;
  if (isIP(host) !== 0) addresses = [{ address: host, family: isIP(host) }];
  else {
    try {
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch (err) {
      throw new AmfError(
        'INVALID_REQUEST',
        `reply_to host ${host} does not resolve: ${(err as Error).message}`,
      );
    }
  }
  if (addresses.length === 0) throw new AmfError('INVALID_REQUEST', `reply_to host ${host} has no address`);
  for (const a of addresses) {
    const why = addressRefusal(a.address, policy);
    if (why) throw new AmfError('INVALID_REQUEST', `reply_to refused: ${why}`);
  }
  const first = addresses[0]!;
  return { url, address: first.address, family: first.family === 6 ? 6 : 4 };
}

/** Options of one delivery. */
export interface DeliveryOptions {
  policy: CallbackPolicy;
  attempts?: number;
  /** First backoff; doubled after each failed attempt. */
  retryDelayMs?: number;
  timeoutMs?: number;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

/** What happened to a delivery. */
export interface DeliveryOutcome {
  delivered: boolean;
  attempts: number;
  status?: number;
  error?: string;
}

const MAX_REPLY_BYTES = 64 * 1024;

function postOnce(
  target: CallbackTarget,
  body: string,
  timeoutMs: number,
  headers: Record<string, string>,
  signal: AbortSignal | undefined,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const client = target.url.protocol === 'https:' ? https : http;
    const req = client.request(
      target.url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'user-agent': 'amf-coordinator (AMP reply_to)',
          ...headers,
        },
        // Connect to the address that was checked, whatever DNS says now.
        lookup: (_host, opts, cb) => {
          if ((opts as { all?: boolean }).all)
            (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [
              { address: target.address, family: target.family },
            ]);
          else cb(null, target.address, target.family);
        },
        timeout: timeoutMs,
        ...(signal ? { signal } : {}),
      },
      (res) => {
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_REPLY_BYTES) res.destroy();
        });
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('close', () => resolve(res.statusCode ?? 0));
        res.on('error', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    timer.unref();
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/**
 * POSTs `payload` as JSON to `replyTo`. 2xx is delivered; network errors, timeouts, 429 and 5xx are
 * retried; any other status (including redirects, which are not followed) ends the delivery.
 */
export async function deliverCallback(
  replyTo: string,
  payload: unknown,
  options: DeliveryOptions,
): Promise<DeliveryOutcome> {
  const attempts = options.attempts ?? 3;
  const timeoutMs = options.timeoutMs ?? 5000;
  let delay = options.retryDelayMs ?? 500;
  const body = JSON.stringify(payload);
  let last: DeliveryOutcome = { delivered: false, attempts: 0 };
  for (let n = 1; n <= attempts; n++) {
    if (options.signal?.aborted) return { ...last, error: 'delivery aborted: coordinator shutting down' };
    try {
      // Resolved again on every attempt: an address that became forbidden is not called.
      const target = await resolveCallback(replyTo, options.policy);
      const status = await postOnce(target, body, timeoutMs, options.headers ?? {}, options.signal);
      if (status >= 200 && status < 300) return { delivered: true, attempts: n, status };
      last = { delivered: false, attempts: n, status, error: `reply_to answered HTTP ${status}` };
      if (status !== 429 && status < 500) return last;
    } catch (err) {
      last = { delivered: false, attempts: n, error: (err as Error).message };
      if (err instanceof AmfError) return last; // refused target: retrying cannot help
    }
    if (n < attempts) {
      await sleep(delay, options.signal);
      delay *= 2;
    }
  }
  return last;
}
