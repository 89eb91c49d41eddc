/**
 * A local stand-in for an LLM provider, speaking the real wire protocols on 127.0.0.1: Anthropic
 * `POST /v1/messages` and OpenAI `POST /v1/chat/completions`. It records every request so tests
 * can check what the watcher sent, and answers with whatever text the test sets.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as the double received it. */
export interface RecordedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** How the double answers the next requests. */
export interface DoubleBehaviour {
  /** The model's text (the JSON verdict, or garbage). */
  text: string;
  /** HTTP status (200 by default); non-2xx answers carry a provider-style error body. */
  status?: number;
  /** Delay before answering, in ms. */
  delayMs?: number;
}

/** A running double. */
export interface LlmDouble {
  /** `http://127.0.0.1:<port>` (the Anthropic base URL; add `/v1` for the OpenAI one). */
  url: string;
  requests: RecordedRequest[];
  behaviour: DoubleBehaviour;
  close(): Promise<void>;
}

/** Starts the double on a random loopback port. */
export async function startLlmDouble(): Promise<LlmDouble> {
  const requests: RecordedRequest[] = [];
  const state: { behaviour: DoubleBehaviour } = {
    behaviour: { text: '{"risk_score": 0.1, "reason": "looks fine"}' },
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      } catch {
        // Recorded as empty; the test will notice.
      }
      requests.push({ path: req.url ?? '', headers: req.headers, body });
      const { text, status = 200, delayMs = 0 } = state.behaviour;
      const answer = (): void => {
        if (res.destroyed) return;
        let payload: unknown;
        if (status >= 300) {
          payload = { type: 'error', error: { type: 'api_error', message: 'double says no' } };
        } else if (req.method === 'POST' && req.url === '/v1/messages') {
          payload = {
            id: 'msg_double',
            type: 'message',
            role: 'assistant',
            model: body.model,
            content: [{ type: 'text', text }],
            stop_reason: 'end_turn',
            usage: { input_tokens: 1, output_tokens: 1 },
          };
        } else if (req.method === 'POST' && req.url === '/v1/chat/completions') {
          payload = {
            id: 'chatcmpl-double',
            object: 'chat.completion',
            created: Math.floor(Date.now() / 1000),
            model: body.model,
            choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
          };
        } else {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(payload));
      };
      if (delayMs > 0) setTimeout(answer, delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    requests,
    get behaviour() {
      return state.behaviour;
    },
    set behaviour(b: DoubleBehaviour) {
      state.behaviour = b;
    },
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
