/**
 * The `webhook` interface: `POST <path>` takes one delivery. Order of checks: body size (413), HMAC
 * signature when the subscription has a secret (401), JSON body (400), prompt template (400 naming the
 * missing field or header), then the agent runs.
 *
 * Response (decided here, see docs/decisions.md): the agent runs inline and the delivery gets its
 * answer, 200 `{"result": "<text>"}` for a string output or the output object itself (the AFM
 * reference behaviour, handy for callers that want the result). A sender that cannot wait sends
 * `Prefer: respond-async` and gets 202 `{"status":"accepted","delivery":"<id>"}` at once (the spec's
 * "acknowledge immediately"); the run continues in the background, bounded in number.
 * `GET <path>` is WebSub intent verification.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { readBody, sendJson, type Router } from '../../http/httpKit.js';
import { AmfError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { AgentResponder, RespondResult } from './responder.js';
import { verifyWebhookSignature } from './webhookSignature.js';
import { mediaType, parseJsonBody, publicAgentError } from './httpInput.js';
import type { WebSubSubscription } from './websub.js';
import type { WebhookTemplate } from '../types.js';
import type { CompiledSignature } from './signature.js';

export interface WebhookOptions {
  path: string;
  responder: AgentResponder;
  /** The compiled `prompt` template; absent = the pretty-printed JSON payload. */
  renderPrompt?: WebhookTemplate;
  /** The interface signature: a declared `input` schema is checked against the payload. */
  signature: CompiledSignature;
  /** `subscription.secret`: deliveries must carry its HMAC. */
  secret?: string;
  websub?: WebSubSubscription;
  maxBodyBytes?: number;
  /** Runs in the background at once (`Prefer: respond-async`) before 429. */
  maxBackgroundRuns?: number;
  /** Agent runs at once over all deliveries, inline and background, before 503. */
  maxRuns?: number;
  log?: Logger;
}

function respondAsync(headers: IncomingHttpHeaders): boolean {
  const prefer = headers.prefer;
  return (Array.isArray(prefer) ? prefer.join(',') : (prefer ?? ''))
    .toLowerCase()
    .split(/[,;]/)
    .some((p) => p.trim() === 'respond-async');
}

function answerBody(result: RespondResult, stringOutput: boolean): unknown {
  if (stringOutput || typeof result.output === 'string')
    return { result: typeof result.output === 'string' ? result.output : result.text };
  return result.output;
}

/** Adds the webhook routes to `router`; `stop()` aborts the background runs (at shutdown). */
export function addWebhookRoutes(router: Router, opts: WebhookOptions): { stop(): void } {
  const backgroundRuns = new Set<AbortController>();
  const maxBody = opts.maxBodyBytes ?? 1024 * 1024;
  const maxBackground = opts.maxBackgroundRuns ?? 16;
  const maxRuns = opts.maxRuns ?? 32;
  let inline = 0;
  // The agent gets the built prompt (text), and answers in the shape of the webhook's output.
  const promptSignature = { input: { type: 'string' }, output: opts.signature.output };
  router.on('POST', opts.path, async (req, res) => {
    const body = await readBody(req, maxBody);
    if (opts.secret !== undefined) {
      const check = verifyWebhookSignature(opts.secret, body, req.headers);
      if (!check.ok) throw new AmfError('UNAUTHORIZED', check.reason);
    }
    // The body must be JSON whatever its label (senders often send text/plain); form encodings are
    // refused with a hint, since GitHub-style senders can be switched to JSON.
    const type = mediaType(req);
    if (type === 'application/x-www-form-urlencoded' || type.startsWith('multipart/'))
      throw new AmfError(
        'INVALID_REQUEST',
        `unsupported Content-Type "${type}": webhook payloads must be JSON (configure the sender for application/json)`,
      );
    if (body.length === 0)
      throw new AmfError('INVALID_REQUEST', 'request body is empty: expected a JSON payload');
    const payload = parseJsonBody(body);
    opts.signature.checkInput(payload);
    let prompt: string;
    try {
      prompt = opts.renderPrompt ? opts.renderPrompt(payload, req.headers) : JSON.stringify(payload, null, 2);
    } catch (err) {
      throw new AmfError(
        'INVALID_REQUEST',
        `cannot build the prompt from this delivery: ${(err as Error).message}`,
        err instanceof AmfError ? err.details : undefined,
      );
    }
    if (inline + backgroundRuns.size >= maxRuns)
      throw new AmfError('OVERLOADED', `the agent is handling ${maxRuns} deliveries already; retry later`);
    const delivery = randomUUID();
    const sessionId = `webhook:${delivery}`;
    if (respondAsync(req.headers)) {
      if (backgroundRuns.size >= maxBackground)
        throw new AmfError(
          'RATE_LIMITED',
          `${backgroundRuns.size} deliveries are still running; retry later`,
        );
      const run = new AbortController();
      backgroundRuns.add(run);
      opts.responder
        .respond({ sessionId, input: prompt, signature: promptSignature, signal: run.signal })
        .then(
          (result) =>
            opts.log?.info(
              { delivery, stopReason: result.stopReason, chars: result.text.length },
              'webhook run done',
            ),
          (err: unknown) => opts.log?.error({ delivery, err: (err as Error).message }, 'webhook run failed'),
        )
        .finally(() => {
          backgroundRuns.delete(run);
          opts.responder.endSession?.(sessionId);
        });
      sendJson(res, 202, { status: 'accepted', delivery });
      return;
    }
    const controller = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) controller.abort(new AmfError('UNAVAILABLE', 'client disconnected'));
    });
    inline++;
    try {
      const result = await opts.responder
        .respond({ sessionId, input: prompt, signature: promptSignature, signal: controller.signal })
        .catch((err: unknown) => {
          throw publicAgentError(err, opts.log);
        });
      sendJson(
        res,
        200,
        answerBody(result, opts.signature.stringOutput),
        result.stopReason ? { 'x-afm-stop-reason': result.stopReason } : {},
      );
    } finally {
      inline--;
      opts.responder.endSession?.(sessionId);
    }
  });
  const websub = opts.websub;
  router.on('GET', opts.path, (_req, res, url) => {
    if (!websub) {
      sendJson(res, 404, {
        error: { code: 'NOT_FOUND', message: 'this webhook has no WebSub subscription' },
      });
      return;
    }
    websub.handleVerification(url, res);
  });
  return {
    stop() {
      for (const run of backgroundRuns) run.abort(new AmfError('UNAVAILABLE', 'the agent is shutting down'));
    },
  };
}
