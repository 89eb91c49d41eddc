/**
 * The coordinator's AMP routes: `POST /api/amp/message`, `GET /api/amp/discover`,
 * `GET /api/amp/jobs/{id}` and the merged A2A card / AMP manifest at `GET /.well-known/agent.json`.
 * Every answer, errors included, is an AMP response body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AmfConfig } from '../../config/config.js';
import type { TaskService } from '../../coordinator/tasks/taskService.js';
import type { LogFn } from '../../log.js';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import { toAmfError } from '../../errors.js';
import { isLoopbackHost } from '../../net/hostRules.js';
import { decodePathSegment, readBody, sendJson, type RouteHandler, type Router } from '../../http/httpKit.js';
import { wireErrorFor } from '../../http/wireErrors.js';
import { ampErrorResponse, validateAmpMessage, makeAmpResponse } from './ampMessage.js';
import { discoverAgents, parseDiscoverQuery } from './ampDiscover.js';
import { ampManifest } from './ampManifest.js';
import { AmpService } from './ampService.js';

/** What the AMP routes need: the mesh's tasks and agents, never the Coordinator. */
export interface AmpRouteDeps {
  tasks: Pick<TaskService, 'submit'>;
  agents: AgentDirectory;
  config: AmfConfig;
  /** The coordinator's own id (`from.id` of every response). */
  selfId: () => string;
  log: LogFn;
  /** The coordinator's bound base URL. */
  getUrl: () => string;
  /** The coordinator's A2A card (the manifest is built on it). */
  card: () => Record<string, unknown>;
  /** First reply_to retry delay (tests shorten it). */
  callbackRetryDelayMs?: number;
}

/** Sends an AMP error response for anything thrown while reading a request. */
function sendAmpFailure(res: ServerResponse, err: unknown, selfId: string): void {
  const e = toAmfError(err);
  if (res.headersSent) {
    res.end();
    return;
  }
  const amp = wireErrorFor(e.code).amp;
  sendJson(res, amp.http, ampErrorResponse(amp.code, e.message, selfId, null, amp.status));
}

/** Registers the AMP routes on `router`; returns the service (close it with the HTTP edge). */
export function registerAmpRoutes(router: Router, deps: AmpRouteDeps): AmpService {
  const { config, selfId } = deps;
  const service = new AmpService({
    tasks: deps.tasks,
    agents: deps.agents,
    selfId,
    messageEndpoint: () => `${deps.getUrl()}/api/amp/message`,
    requestTimeoutMs: config.http.requestTimeoutSeconds * 1000,
    maxJobs: config.http.ampMaxJobs,
    callbackPolicy: () => ({
      allowPrivate: config.http.allowPrivateCallbacks || isLoopbackHost(config.coordinator.host),
    }),
    ...(deps.callbackRetryDelayMs !== undefined ? { callbackRetryDelayMs: deps.callbackRetryDelayMs } : {}),
    log: deps.log,
  });
  const guarded =
    (handler: RouteHandler): RouteHandler =>
    async (req, res, url) => {
      try {
        await handler(req, res, url);
      } catch (err) {
        sendAmpFailure(res, err, selfId());
      }
    };

  router.on(
    'POST',
    '/api/amp/message',
    guarded(async (req: IncomingMessage, res: ServerResponse) => {
      const raw = await readBody(req, config.http.maxBodyBytes);
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch (err) {
        sendJson(
          res,
          400,
          ampErrorResponse(
            'invalid_message',
            `request body is not valid JSON: ${(err as Error).message}`,
            selfId(),
          ),
        );
        return;
      }
      const checked = validateAmpMessage(body);
      if (!checked.ok) {
        sendJson(
          res,
          400,
          makeAmpResponse({
            inReplyTo: checked.inReplyTo,
            fromId: selfId(),
            status: 'error',
            error: { code: checked.code, message: checked.message },
          }),
        );
        return;
      }
      const controller = new AbortController();
      res.on('close', () => {
        if (!res.writableFinished) controller.abort();
      });
      const reply = await service.handle(checked.message, controller.signal);
      if (!res.destroyed) sendJson(res, reply.httpStatus, reply.response);
    }),
  );

  router.on(
    'GET',
    '/api/amp/discover',
    guarded((_req, res, url) => {
      const query = parseDiscoverQuery(url.searchParams);
      if (!query.ok) {
        sendJson(res, 400, ampErrorResponse('invalid_message', query.message, selfId()));
        return;
      }
      sendJson(res, 200, discoverAgents(deps.agents, query, `${deps.getUrl()}/api/amp/message`));
    }),
  );

  router.onPrefix(
    'GET',
    '/api/amp/jobs/',
    guarded((_req, res, url) => {
      const id = decodePathSegment(url.pathname.slice('/api/amp/jobs/'.length));
      const job = /^[0-9a-f-]{36}$/.test(id) ? service.jobs.get(id) : undefined;
      if (!job) {
        sendJson(
          res,
          404,
          ampErrorResponse('not_found', `no AMP job ${id.slice(0, 64)} is known here`, selfId()),
        );
        return;
      }
      const delivery = job.delivery ? { delivery: { ...job.delivery } } : {};
      if (job.response) {
        sendJson(res, 200, { ...job.response, job_id: job.id, ...delivery });
        return;
      }
      sendJson(res, 200, {
        ...makeAmpResponse({
          inReplyTo: job.requestId,
          fromId: selfId(),
          status: 'deferred',
          result: { job_id: job.id, state: 'running', ...(job.taskId ? { task_id: job.taskId } : {}) },
        }),
        job_id: job.id,
        ...delivery,
      });
    }),
  );

  // One document for legacy A2A card readers and AMP clients (see ampManifest.ts).
  router.on('GET', '/.well-known/agent.json', (_req, res) =>
    sendJson(res, 200, ampManifest(deps.card(), deps.getUrl(), deps.agents, selfId())),
  );
  return service;
}
