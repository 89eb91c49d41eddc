/**
 * The fetch the Streamable HTTP transport uses for every request to an MCP server: each URL it is
 * asked for (including redirect targets) is checked against the metadata refusal, redirects are not
 * followed by fetch itself, and response bodies are capped so a hostile or broken server cannot make
 * us buffer without bound.
 */
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { AmfError } from '../errors.js';
import { checkServerUrl, MAX_MCP_MESSAGE_BYTES } from './limits.js';

/**
 * Wraps a body so it errors once it carries more than `maxBytes`: for `text/event-stream` the count
 * is per SSE event (reset at each blank line) because a long-lived stream may carry many messages;
 * for anything else it is the whole body, which is one JSON-RPC message.
 */
function capBody(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  perEvent: boolean,
  what: string,
  onOversize: ((err: AmfError) => void) | undefined,
): ReadableStream<Uint8Array> {
  let count = 0;
  let atLineStart = false;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        if (!perEvent) {
          count += chunk.byteLength;
        } else {
          for (const byte of chunk) {
            if (byte === 0x0a) {
              // "\n\n" (or "\n\r\n") ends an SSE event: the next event starts a fresh count.
              if (atLineStart) count = 0;
              atLineStart = true;
            } else if (byte !== 0x0d) {
              atLineStart = false;
              count++;
            }
          }
        }
        if (count > maxBytes) {
          const err = new AmfError(
            'PAYLOAD_TOO_LARGE',
            `${what}: message larger than ${maxBytes} bytes refused`,
          );
          controller.error(err);
          onOversize?.(err);
          return;
        }
        controller.enqueue(chunk);
      },
    }),
  );
}

/** Options of `createGuardedFetch`. */
export interface GuardedFetchOptions {
  /** Server name for error messages. */
  server: string;
  maxMessageBytes?: number;
  /**
   * Told when a body breaks the cap. The SDK treats a broken SSE stream as a reason to reconnect, so
   * without this the request would just run into its timeout; the hub disconnects the server instead.
   */
  onOversize?: (err: AmfError) => void;
  /** The fetch to wrap (default: global fetch). */
  fetch?: FetchLike;
}

/** Returns a fetch that refuses metadata hosts, never follows redirects by itself and caps bodies. */
export function createGuardedFetch(options: GuardedFetchOptions): FetchLike {
  const maxBytes = options.maxMessageBytes ?? MAX_MCP_MESSAGE_BYTES;
  const base = options.fetch ?? fetch;
  const what = `MCP server "${options.server}"`;
  return async (input, init) => {
    checkServerUrl(options.server, input);
    // 'manual' hands 3xx back to the SDK, which re-enters this function for any hop it follows,
    // so every hop goes through the check above.
    const redirect = init?.redirect === 'error' ? 'error' : 'manual';
    const res = await base(input, { ...init, redirect });
    const declared = Number(res.headers.get('content-length'));
    if (Number.isFinite(declared) && declared > maxBytes) {
      await res.body?.cancel().catch(() => undefined);
      const err = new AmfError(
        'PAYLOAD_TOO_LARGE',
        `${what}: response of ${declared} bytes refused (limit ${maxBytes})`,
      );
      options.onOversize?.(err);
      throw err;
    }
    // Null-body statuses cannot be re-wrapped (the Response constructor refuses a body for them).
    if (!res.body || [101, 204, 205, 304].includes(res.status)) return res;
    const perEvent = (res.headers.get('content-type') ?? '').toLowerCase().includes('text/event-stream');
    return new Response(capBody(res.body, maxBytes, perEvent, what, options.onOversize), {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  };
}
