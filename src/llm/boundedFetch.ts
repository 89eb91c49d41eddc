/**
 * The fetch both model SDKs are given: a response body larger than the cap errors instead of being
 * buffered, so a broken or hostile model server (or a proxy in front of it) cannot make an agent
 * hold an unbounded answer in memory. Streams get a larger cap than single JSON bodies because a
 * long answer travels as many small SSE events that each repeat some framing.
 */
import { createGuardedFetch } from '../net/guardedFetch.js';

/** Largest non-streamed response body accepted from a model server. */
export const MAX_MODEL_RESPONSE_BYTES = 8 * 1024 * 1024;
/** Largest streamed (SSE) response accepted from a model server, all events together. */
export const MAX_MODEL_STREAM_BYTES = 32 * 1024 * 1024;

/** Caps of `createBoundedFetch`. */
export interface BoundedFetchOptions {
  readonly maxBodyBytes?: number;
  readonly maxStreamBytes?: number;
  /** The fetch to wrap (default: global fetch). */
  readonly fetch?: typeof fetch;
}

/** Redirects a model server may send (e.g. a proxy adding a trailing slash); each hop is checked. */
const MAX_MODEL_REDIRECTS = 5;

/**
 * Returns a fetch whose response bodies error once they pass the caps. Redirects are followed here,
 * not by fetch, so a model server (or a proxy in front of it) cannot bounce a request, with its API
 * key, to a metadata address.
 */
export function createBoundedFetch(options: BoundedFetchOptions = {}): typeof fetch {
  return createGuardedFetch({
    what: 'model',
    redirects: MAX_MODEL_REDIRECTS,
    maxBytes: options.maxBodyBytes ?? MAX_MODEL_RESPONSE_BYTES,
    streamCap: options.maxStreamBytes ?? MAX_MODEL_STREAM_BYTES,
    ...(options.fetch ? { fetch: options.fetch } : {}),
  }) as typeof fetch;
}
