/**
 * The only way the A2A client reaches the network. A remote agent chooses the URLs it is called at
 * (its card's `supportedInterfaces`), so every request is checked here: http(s) only, no credentials
 * in the URL, never a cloud metadata or link-local address, only the host the card was fetched from,
 * no redirect followed behind our back, and response bodies capped.
 */
import { AmfError } from '../errors.js';
import { isNeverFetchedHost, sameHost } from '../net/hostRules.js';
import { readCappedText as readWithin } from '../util/readCappedText.js';

/** Largest JSON response (one JSON-RPC or REST body) accepted from a remote agent. */
export const MAX_A2A_RESPONSE_BYTES = 10 * 1024 * 1024;

/**
 * Parses and checks a URL an A2A agent is reached at. `what` names it in the error ("agent card URL
 * of \"weather\"") so the message says which configuration entry or card field to fix.
 */
export function checkAgentUrl(value: string | URL, what: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new AmfError('INVALID_REQUEST', `${what} "${String(value).slice(0, 100)}" does not parse`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new AmfError('INVALID_REQUEST', `${what} must be http(s), got ${url.protocol}`);
  if (url.username || url.password)
    throw new AmfError('INVALID_REQUEST', `${what} must not carry credentials`);
  if (isNeverFetchedHost(url.hostname))
    throw new AmfError(
      'INVALID_REQUEST',
      `${what}: host ${url.hostname} is a cloud metadata or link-local address; refused`,
    );
  return url;
}

/** Reads a response body as text, refusing it once it passes `maxBytes`. */
export async function readCappedText(res: Response, maxBytes: number, what: string): Promise<string> {
  const read = await readWithin(res, maxBytes);
  if (read.ok) return read.text;
  throw new AmfError(
    'PAYLOAD_TOO_LARGE',
    read.declaredBytes !== undefined
      ? `${what} is ${read.declaredBytes} bytes; the limit is ${maxBytes}`
      : `${what} exceeds ${maxBytes} bytes`,
  );
}

/** Options of `createAgentFetch`. */
export interface AgentFetchOptions {
  /** The agent's name for error messages. */
  agent: string;
  /** The only host requests may go to (the host the card was fetched from; loopback names are one). */
  host: string;
  maxResponseBytes?: number;
  /** Extra headers on every request (e.g. `Authorization` for `amf a2a send --api-key`). */
  headers?: Record<string, string>;
}

/**
 * A fetch for the SDK's transports. Non-streaming bodies are read here under the cap and handed on
 * as a fresh Response; SSE bodies pass through (the SDK's SSE parser bounds each event, 4 MiB).
 */
export function createAgentFetch(options: AgentFetchOptions): typeof fetch {
  const maxBytes = options.maxResponseBytes ?? MAX_A2A_RESPONSE_BYTES;
  const agentFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const target = input instanceof Request ? input.url : input;
    const url = checkAgentUrl(target, `A2A agent "${options.agent}" URL`);
    if (!sameHost(url.hostname, options.host))
      throw new AmfError(
        'INVALID_REQUEST',
        `A2A agent "${options.agent}": ${url.hostname} is not the host its card came from (${options.host}); refused`,
      );
    const headers = new Headers(init?.headers);
    for (const [k, v] of Object.entries(options.headers ?? {})) if (!headers.has(k)) headers.set(k, v);
    const res = await fetch(input instanceof Request ? input : url, { ...init, headers, redirect: 'manual' });
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel().catch(() => undefined);
      throw new AmfError(
        'UNAVAILABLE',
        `A2A agent "${options.agent}" answered a redirect (HTTP ${res.status}); redirects are not followed`,
      );
    }
    const type = (res.headers.get('content-type') ?? '').toLowerCase();
    if (type.startsWith('text/event-stream') || !res.body || [204, 205, 304].includes(res.status)) return res;
    const text = await readCappedText(res, maxBytes, `response of A2A agent "${options.agent}"`);
    return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return agentFetch as typeof fetch;
}
