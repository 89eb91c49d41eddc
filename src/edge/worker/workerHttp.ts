/**
 * The worker's HTTP edge: its agent card, `POST /tasks/send` for direct submission (the same handler
 * as mesh tasks, with the same events published on NATS, under an id the worker chooses), and
 * `/health`. Who may call which path is decided before routing (workerEdgeGate.ts).
 */
import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { randomUUID } from 'node:crypto';
import { AmfError } from '../../errors.js';
import {
  Router,
  readJsonObject,
  requestDeadlineOptions,
  requestUrl,
  sendError,
  sendJson,
  type RequestDeadlines,
} from '../../http/httpKit.js';
import { bodyValidator, validBody } from '../../http/bodyValidator.js';
import type { MeshWorker } from '../../worker/meshWorker.js';
import type { WorkerHandler } from '../../worker/handlerApi.js';
import type { McpEndpoint } from '../../protocols/mcp/endpoint/endpoint.js';
import { legacyAgentCard, workerAgentCard } from '../../protocols/a2a/agentCards.js';
import { cardRoute } from '../../protocols/a2a/cardRoute.js';
import { createWorkerA2a } from '../../protocols/a2a/index.js';
import type { RequestGate } from '../../http/svidGate.js';
import { WORKER_TASK_BODY_SCHEMA, type WorkerTaskBody } from '../routeBodySchemas.js';

const checkWorkerTask = bodyValidator<WorkerTaskBody>(WORKER_TASK_BODY_SCHEMA);

export { workerAgentCard };

export interface WorkerHttpOptions {
  host: string;
  port: number;
  name: string;
  tags: string[];
  trustDomain: string;
  handler: WorkerHandler;
  version: string;
  maxBodyBytes?: number;
  /** The worker's MCP endpoint (served at `/mcp`, announced in the card). */
  mcp?: McpEndpoint;
  /** Short tool alias announced as `x-amf.tool_alias` (the coordinator decides if it is granted). */
  toolAlias?: string;
  /** SPIFFE is active: the card declares that every call but discovery needs a credential. */
  spiffe?: boolean;
}

export interface WorkerHttpServer {
  server: Server;
  url: string;
  close(): Promise<void>;
}

/** Builds the router of a running worker whose HTTP endpoint is `endpoint`. */
export function workerRouter(worker: MeshWorker, opts: WorkerHttpOptions, endpoint: string): Router {
  const getWorker = () => worker;
  const getEndpoint = () => endpoint;
  const maxBody = opts.maxBodyBytes ?? 1024 * 1024;
  const buildCard = () => workerAgentCard(getWorker(), opts, getEndpoint());
  const router = new Router();
  // MCP (Streamable HTTP): POST messages, GET the server→client stream, DELETE to end a session.
  const mcp = opts.mcp;
  if (mcp)
    for (const method of ['POST', 'GET', 'DELETE'])
      router.on(method, '/mcp', (req, res) => mcp.handle(req, res));
  // A2A 1.0 (and 0.3): JSON-RPC at /a2a, HTTP+JSON under /a2a/rest, answered by this worker's handler.
  createWorkerA2a(getWorker, opts, getEndpoint, maxBody).server.register(router);
  return router
    .on('GET', '/.well-known/agent-card.json', cardRoute(buildCard))
    .on(
      'GET',
      '/.well-known/agent.json',
      cardRoute(() => legacyAgentCard(buildCard())),
    )
    .on('GET', '/health', (_req, res) =>
      sendJson(res, 200, {
        status: 'ok',
        agent_id: getWorker().agentId,
        in_flight: getWorker().inFlightCount,
      }),
    )
    .on('POST', '/tasks/send', async (req, res) => {
      const body = validBody(checkWorkerTask, await readJsonObject(req, maxBody));
      const text = body.text ?? body.task;
      if (text === undefined)
        throw new AmfError('INVALID_REQUEST', 'body needs "text" (or "task"): the task as a string', {
          param: 'text',
        });
      const tag = body.tag ?? opts.tags[0]!;
      if (!opts.tags.includes(tag))
        throw new AmfError('INVALID_REQUEST', `this worker serves ${opts.tags.join(', ')}, not "${tag}"`, {
          param: 'tag',
        });
      const taskId = randomUUID();
      const controller = new AbortController();
      // Abort only when the client went away before the answer (an abort builds a DOMException).
      res.on('close', () => {
        if (!res.writableFinished) controller.abort();
      });
      // Claim, progress and final go on NATS like a mesh task's, so the mesh UI sees direct work.
      const outcome = await getWorker().run(
        {
          taskId,
          traceId: taskId,
          tag,
          text,
          messages: [{ role: 'user', content: text }],
          stream: false,
          attempt: 1,
        },
        { origin: 'direct', signal: controller.signal },
      );
      if (!outcome.ok) {
        sendJson(res, 422, {
          task_id: taskId,
          status: 'failed',
          error: { code: outcome.code, message: outcome.message },
        });
        return;
      }
      sendJson(res, 200, {
        task_id: taskId,
        status: 'completed',
        agent_id: getWorker().agentId,
        result: { text: outcome.result.text, ...(outcome.result.data ? { data: outcome.result.data } : {}) },
      });
    });
}

/** Creates the HTTP server (HTTPS with `tls`: PEM certificate and key) for a router with uniform error handling. */
export function serveRouter(
  router: Router,
  tls?: { cert: string | Buffer; key: string | Buffer },
  deadlines?: RequestDeadlines,
): Server {
  const server = createRouterServer(tls, deadlines);
  server.serve(router);
  return server.server;
}

/**
 * A server that can listen before its router exists: the worker must know its bound endpoint before
 * it can be built, and its router needs the built worker. Until `serve()` every request gets a 503
 * with `Retry-After`, so nothing arrives at a half-built worker. Clients that send their request
 * too slowly are cut off with 408 (`deadlines`, default 10 s for headers, 30 s for the whole request).
 */
export function createRouterServer(
  tls?: { cert: string | Buffer; key: string | Buffer },
  deadlines?: RequestDeadlines,
): {
  server: Server;
  /** Starts answering with `router`; `gate` (who may call which path) sees every request first. */
  serve(router: Router, gate?: RequestGate): void;
} {
  let router: Router | undefined;
  let gate: RequestGate | undefined;
  const handle: Parameters<typeof createServer>[1] = (req, res) => {
    if (!router) {
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
      res.end(JSON.stringify({ error: { code: 'unavailable', message: 'the worker is starting' } }));
      return;
    }
    const url = requestUrl(req);
    const r = router;
    const handled = gate
      ? gate(req, res, url).then((pass) => (pass ? r.handle(req, res, url) : undefined))
      : r.handle(req, res, url);
    handled.catch((err: unknown) => sendError(res, err));
  };
  const limits = requestDeadlineOptions(deadlines);
  const server = tls ? createHttpsServer({ ...limits, ...tls }, handle) : createServer(limits, handle);
  return {
    server,
    serve(r, g) {
      router = r;
      gate = g;
    },
  };
}
