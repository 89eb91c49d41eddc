/**
 * Fetches an admitted agent's card (`card=`) without becoming an SSRF gadget: only http(s), only the
 * host the agent advertised as its endpoint, no redirect to another host, never a cloud metadata
 * address, bounded in time and size.
 */
import { isNeverFetchedHost } from '../net/hostRules.js';
import { readCappedText } from '../util/readCappedText.js';

export interface CardFetchOptions {
  timeoutMs?: number;
  maxBytes?: number;
  maxRedirects?: number;
}

export class CardFetchError extends Error {
  constructor(
    readonly code:
      | 'card_url_invalid'
      | 'card_host_mismatch'
      | 'card_redirect_refused'
      | 'card_too_large'
      | 'card_timeout'
      | 'card_http_error'
      | 'card_not_json',
    message: string,
  ) {
    super(message);
    this.name = 'CardFetchError';
  }
}

function checkUrl(value: string, allowedHost: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CardFetchError('card_url_invalid', `card URL "${value.slice(0, 100)}" does not parse`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new CardFetchError('card_url_invalid', `card URL must be http(s), got ${url.protocol}`);
  if (url.username || url.password)
    throw new CardFetchError('card_url_invalid', 'card URL must not carry credentials');
  // Link-local and cloud metadata addresses are never fetched, whatever an agent advertises.
  if (isNeverFetchedHost(url.hostname))
    throw new CardFetchError(
      'card_url_invalid',
      `card host ${url.hostname} is a link-local or metadata address`,
    );
  if (url.hostname.toLowerCase() !== allowedHost.toLowerCase())
    throw new CardFetchError(
      'card_host_mismatch',
      `card host ${url.hostname} is not the advertised endpoint host ${allowedHost}`,
    );
  return url;
}

async function readBounded(res: Response, maxBytes: number): Promise<string> {
  const read = await readCappedText(res, maxBytes);
  if (read.ok) return read.text;
  throw new CardFetchError(
    'card_too_large',
    read.declaredBytes !== undefined
      ? `card is ${read.declaredBytes} bytes; limit ${maxBytes}`
      : `card exceeds ${maxBytes} bytes`,
  );
}

/**
 * Fetches and parses the agent card at `cardUrl`, allowed only on the host of `endpoint`. Redirects
 * are followed by hand so each hop is checked against the same host rule.
 */
export async function fetchAgentCard(
  cardUrl: string,
  endpoint: string,
  options: CardFetchOptions = {},
): Promise<Record<string, unknown>> {
  const allowedHost = new URL(endpoint).hostname;
  const timeoutMs = options.timeoutMs ?? 3000;
  const maxBytes = options.maxBytes ?? 64 * 1024;
  const signal = AbortSignal.timeout(timeoutMs);
  let url = checkUrl(cardUrl, allowedHost);
  for (let hop = 0; ; hop++) {
    let res: Response;
    try {
      res = await fetch(url, { redirect: 'manual', signal, headers: { accept: 'application/json' } });
    } catch (err) {
      if (signal.aborted)
        throw new CardFetchError('card_timeout', `card fetch took longer than ${timeoutMs} ms`);
      throw new CardFetchError('card_http_error', `card fetch failed: ${(err as Error).message}`);
    }
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel();
      const location = res.headers.get('location');
      if (!location || hop >= (options.maxRedirects ?? 3))
        throw new CardFetchError('card_redirect_refused', 'too many or empty redirects');
      try {
        url = checkUrl(new URL(location, url).href, allowedHost);
      } catch (err) {
        if (err instanceof CardFetchError && err.code === 'card_host_mismatch')
          throw new CardFetchError(
            'card_redirect_refused',
            `redirect to another host refused: ${err.message}`,
          );
        throw err;
      }
      continue;
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new CardFetchError('card_http_error', `card fetch answered HTTP ${res.status}`);
    }
    let text: string;
    try {
      text = await readBounded(res, maxBytes);
    } catch (err) {
      if (signal.aborted)
        throw new CardFetchError('card_timeout', `card fetch took longer than ${timeoutMs} ms`);
      throw err;
    }
    let card: unknown;
    try {
      card = JSON.parse(text);
    } catch {
      throw new CardFetchError('card_not_json', 'card is not JSON');
    }
    if (typeof card !== 'object' || card === null || Array.isArray(card))
      throw new CardFetchError('card_not_json', 'card is not a JSON object');
    return card as Record<string, unknown>;
  }
}
