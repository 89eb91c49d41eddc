/**
 * The `webchat` interface: `POST <path>` answers one chat turn in the session named by
 * `X-Session-Id` (default "default"); `Accept: text/event-stream` streams it as SSE (`delta` events,
 * then `done` or `error`); `GET <path>/ui` serves the chat page.
 *
 * Bodies: a string signature takes text/plain (or a JSON string); a structured one takes
 * application/json. Replies: string→string answers text/plain; otherwise JSON, with a string output
 * wrapped as `{"response": "..."}` (the AFM reference behaviour).
 */
import type { ServerResponse } from 'node:http';
import { readBody, sendJson, type Router } from '../../http/httpKit.js';
import { toAmfError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { AgentResponder, RespondResult } from './responder.js';
import type { CompiledSignature } from './signature.js';
import { parseSessionId, type SessionStore } from './sessionStore.js';
import { abortOnDisconnect, chatInput, publicAgentError, SseWriter, wantsEventStream } from './httpInput.js';
import { renderChatPage } from './chatPage.js';

export interface WebchatOptions {
  path: string;
  signature: CompiledSignature;
  responder: AgentResponder;
  sessions: SessionStore;
  agent: { name: string; description: string; version: string };
  maxBodyBytes?: number;
  log?: Logger;
}

function stopHeaders(result: RespondResult): Record<string, string> {
  return result.stopReason ? { 'x-afm-stop-reason': result.stopReason } : {};
}

function sendAnswer(
  res: ServerResponse,
  sig: CompiledSignature,
  result: RespondResult,
  session: string,
): void {
  const headers = { 'x-session-id': session, ...stopHeaders(result) };
  if (sig.stringInput && sig.stringOutput) {
    const text = typeof result.output === 'string' ? result.output : result.text;
    res.writeHead(200, {
      'content-type': 'text/plain; charset=utf-8',
      'content-length': Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
    return;
  }
  const output = typeof result.output === 'string' ? { response: result.output } : result.output;
  sendJson(res, 200, output, headers);
}

/** Adds the webchat routes to `router`. */
export function addWebchatRoutes(router: Router, opts: WebchatOptions): void {
  const maxBody = opts.maxBodyBytes ?? 256 * 1024;
  const sig = opts.signature;
  router.on('POST', opts.path, async (req, res) => {
    const session = parseSessionId(req.headers['x-session-id']);
    const input = chatInput(req, await readBody(req, maxBody), sig);
    const signal = abortOnDisconnect(res);
    const turn = (onDelta?: (text: string) => void) =>
      opts.sessions.run(`webchat:${session}`, () =>
        opts.responder
          .respond({
            sessionId: `webchat:${session}`,
            input,
            signature: { input: sig.input, output: sig.output },
            signal,
            ...(onDelta ? { onDelta } : {}),
          })
          .catch((err: unknown) => {
            throw publicAgentError(err, opts.log);
          }),
      );
    if (!wantsEventStream(req)) {
      sendAnswer(res, sig, await turn(), session);
      return;
    }
    const sse = new SseWriter(res);
    try {
      const result = await turn((text) => sse.send('delta', { text }));
      sse.send('done', {
        output: result.output,
        text: result.text,
        ...(result.stopReason ? { stop_reason: result.stopReason } : {}),
      });
    } catch (err) {
      const e = toAmfError(err);
      sse.send('error', { code: e.code, message: e.message });
    }
    sse.end();
  });
  router.on('GET', `${opts.path}/ui`, (_req, res) => {
    const { html, csp } = renderChatPage({
      ...opts.agent,
      chatPath: opts.path,
      stringInput: sig.stringInput,
    });
    res.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': csp,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-store',
    });
    res.end(html);
  });
}
