/**
 * Fetches an admitted agent's card (`card=`) without becoming an SSRF gadget: only http(s), only the
 * host the agent advertised as its endpoint, no redirect to another host, never a cloud metadata
 * address, bounded in time and size.
 */
import { AmfError } from '../errors.js';
import { guardedFetch, NetError, type GuardedFetchOptions } from '../net/guardedFetch.js';
import { withAmfBlock } from '../util/amfCardBlock.js';

export interface CardFetchOptions {
  timeoutMs?: number;
  maxBytes?: number;
  maxRedirects?: number;
}

/** Why a card was not fetched; also the denial notice's wording. */
export type CardFetchErrorCode =
  | 'card_url_invalid'
  | 'card_host_mismatch'
  | 'card_redirect_refused'
  | 'card_too_large'
  | 'card_timeout'
  | 'card_http_error'
  | 'card_not_json';

export class CardFetchError extends AmfError {
  declare readonly code: CardFetchErrorCode;

  constructor(code: CardFetchErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, undefined, options);
    this.name = 'CardFetchError';
  }
}

/** The admission vocabulary for a refusal of the guarded fetch. */
function cardError(err: NetError): CardFetchError {
  switch (err.reason) {
    case 'url_invalid':
    case 'host_refused':
      return new CardFetchError('card_url_invalid', err.message, { cause: err });
    case 'host_mismatch':
      // Only the first URL can be another host: guardedFetch reports a redirect there as redirect_refused.
      return new CardFetchError('card_host_mismatch', err.message, { cause: err });
    case 'redirect_refused':
      return new CardFetchError('card_redirect_refused', err.message, { cause: err });
    case 'too_large':
      return new CardFetchError('card_too_large', err.message, { cause: err });
    case 'timeout':
      return new CardFetchError('card_timeout', err.message, { cause: err });
  }
}

/**
 * Fetches and parses the agent card at `cardUrl`, allowed only on the host of `endpoint` (compared
 * exactly: an advertised 127.0.0.1 does not admit a card on `localhost`). Redirects are followed by
 * the guarded fetch, each hop checked against the same host rule.
 */
export async function fetchAgentCard(
  cardUrl: string,
  endpoint: string,
  options: CardFetchOptions = {},
): Promise<Record<string, unknown>> {
  const timeoutMs = options.timeoutMs ?? 3000;
  const maxBytes = options.maxBytes ?? 64 * 1024;
  const policy: GuardedFetchOptions = {
    what: 'card',
    host: new URL(endpoint).hostname,
    // The same rules as validateAdvertisement's cardUrlRefusal, so an admitted card URL passes here.
    hostRole: 'the advertised endpoint host',
    loopbackIsOneHost: false,
    redirects: options.maxRedirects ?? 3,
    timeoutMs,
    maxBytes,
    // A card is one JSON document: an event stream gets the same whole-body cap.
    streamCap: maxBytes,
    buffer: true,
  };
  let text: string;
  try {
    const res = await guardedFetch(cardUrl, { headers: { accept: 'application/json' } }, policy);
    if (!res.ok) {
      await res.body?.cancel();
      throw new CardFetchError('card_http_error', `card fetch answered HTTP ${res.status}`);
    }
    text = await res.text();
  } catch (err) {
    if (err instanceof CardFetchError) throw err;
    if (err instanceof NetError) throw cardError(err);
    throw new CardFetchError('card_http_error', `card fetch failed: ${(err as Error).message}`, {
      cause: err,
    });
  }
  let card: unknown;
  try {
    card = JSON.parse(text);
  } catch {
    throw new CardFetchError('card_not_json', 'card is not JSON');
  }
  if (typeof card !== 'object' || card === null || Array.isArray(card))
    throw new CardFetchError('card_not_json', 'card is not a JSON object');
  // AMF's readers look for `x-amf`; a 1.0 card states it as an extension (src/util/amfCardBlock.ts).
  return withAmfBlock(card as Record<string, unknown>);
}
