/**
 * A fetch over node:http / node:https with a keep-alive agent of our choosing, for the SDK transport
 * the federation forwards calls through. Global fetch (undici) cannot take an https.Agent, which the
 * TOFU pin check needs, and it detaches its listeners from a long-lived abort signal only when a
 * request is garbage-collected: the SDK passes one signal per connection, so under load thousands of
 * listeners pile up on it. node:http removes its listener when the request ends, and costs less CPU
 * per call. Handles what the SDK sends: string or byte bodies, headers, an abort signal.
 */
import { getMaxListeners, setMaxListeners } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { AmfError } from '../../../errors.js';

function toHeaders(raw: NodeJS.Dict<string | string[]>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  return headers;
}

/** A fetch whose requests go through `agent` (an https.Agent for https:// URLs, else an http.Agent). */
export function nodeFetch(agent: http.Agent): FetchLike {
  const secure = agent instanceof https.Agent;
  return (input, init = {}) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(input);
      if (url.protocol !== (secure ? 'https:' : 'http:')) {
        reject(
          new AmfError(
            'INTERNAL',
            `this fetch serves ${secure ? 'https' : 'http'}:// only, got ${url.protocol}`,
          ),
        );
        return;
      }
      const method = init.method ?? 'GET';
      // Concurrent calls over one SDK connection share its signal, one listener per request in
      // flight (removed when it ends): raise the default warning threshold of 10 accordingly.
      if (init.signal && getMaxListeners(init.signal) < 1000) setMaxListeners(1000, init.signal);
      const options: http.RequestOptions = {
        method,
        agent,
        headers: Object.fromEntries(new Headers(init.headers).entries()),
        ...(init.signal ? { signal: init.signal } : {}),
      };
      const req = secure ? https.request(url, options) : http.request(url, options);
      req.once('error', reject);
      req.once('response', (res) => {
        const status = res.statusCode ?? 502;
        const nullBody = method === 'HEAD' || [204, 205, 304].includes(status);
        if (nullBody) res.resume();
        resolve(
          new Response(nullBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
            status,
            statusText: res.statusMessage ?? '',
            headers: toHeaders(res.headers),
          }),
        );
      });
      const body = init.body;
      if (body === undefined || body === null) req.end();
      else if (typeof body === 'string' || body instanceof Uint8Array) req.end(body);
      else {
        req.destroy();
        reject(new AmfError('INTERNAL', 'this fetch sends string or byte bodies only'));
      }
    });
}
