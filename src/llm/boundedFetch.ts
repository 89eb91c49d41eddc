/**
 * The fetch both model SDKs are given: a response body larger than the cap errors instead of being
 * buffered, so a broken or hostile model server (or a proxy in front of it) cannot make an agent
 * hold an unbounded answer in memory. Streams get a larger cap than single JSON bodies because a
 * long answer travels as many small SSE events that each repeat some framing.
 */
import { AmfError } from '../errors.js';

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

function capped(body: ReadableStream<Uint8Array>, limit: number, what: string): ReadableStream<Uint8Array> {
  let count = 0;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        count += chunk.byteLength;
        if (count > limit) {
          controller.error(new AmfError('PAYLOAD_TOO_LARGE', `${what} larger than ${limit} bytes refused`));
          return;
        }
        controller.enqueue(chunk);
      },
    }),
  );
}

/** Returns a fetch whose response bodies error once they pass the caps. */
export function createBoundedFetch(options: BoundedFetchOptions = {}): typeof fetch {
  const base = options.fetch ?? fetch;
  const maxBody = options.maxBodyBytes ?? MAX_MODEL_RESPONSE_BYTES;
  const maxStream = options.maxStreamBytes ?? MAX_MODEL_STREAM_BYTES;
  return async (input, init) => {
    const res = await base(input, init);
    if (!res.body || [101, 204, 205, 304].includes(res.status)) return res;
    const isStream = (res.headers.get('content-type') ?? '').toLowerCase().includes('text/event-stream');
    const limit = isStream ? maxStream : maxBody;
    const declared = Number(res.headers.get('content-length'));
    if (Number.isFinite(declared) && declared > limit) {
      await res.body.cancel().catch(() => undefined);
      throw new AmfError('PAYLOAD_TOO_LARGE', `model response of ${declared} bytes refused (limit ${limit})`);
    }
    return new Response(capped(res.body, limit, isStream ? 'model stream' : 'model response'), {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  };
}
