/**
 * The coordinator's HTTP edge: UI, event stream, publish, registry, agent card, health, the OpenAI
 * API and metrics. Who may call what is decided here once per request, by the route table of
 * http/routeAccess.ts, with the operator key (configured, or generated into the data dir). It serves
 * the runtime's federated MCP catalog (coordinatorRuntime.ts); `startCoordinator` composes the
 * process.
 */
import { setMaxListeners } from 'node:events';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { AmfError } from '../errors.js';
import { Coordinator } from '../coordinator/coordinator.js';
import { startA2aBridges } from './a2aBridgeApp.js';
import { CoordinatorMetrics } from '../coordinator/metrics.js';
import { taskSnapshot } from '../coordinator/sharedState.js';
import { handleChatCompletion, listModels, sendOpenAiError } from '../protocols/openai/chatCompletions.js';
import { EventStreamHub } from '../http/eventStream.js';
import {
  Router,
  decodePathSegment,
  requestDeadlineOptions,
  requestUrl,
  sendError,
  sendJson,
} from '../http/httpKit.js';
import { closeServer, listen, stopAccepting } from '../http/httpServer.js';
import { advertisedUrl } from '../net/advertisedHost.js';
import { createServer } from 'node:http';
import { VERSION } from '../version.js';
import type { McpAuditLog } from '../protocols/mcp/federation/audit.js';
import { coordinatorAgentCard, legacyAgentCard } from '../protocols/a2a/agentCards.js';
import { cardRoute } from '../protocols/a2a/cardRoute.js';
import { createCoordinatorA2a } from '../protocols/a2a/index.js';

export { coordinatorAgentCard };
import type { McpFederation } from '../protocols/mcp/federation/federation.js';
import { createCoordinatorMcpEndpoint } from '../protocols/mcp/federation/endpoint.js';
import { mcpSessionLimits, type McpEndpoint } from '../protocols/mcp/endpoint/endpoint.js';
import { registerAmpRoutes } from '../protocols/amp/ampRoutes.js';
import { AMP_IN_A2A } from '../protocols/amp/ampA2a.js';
import { registerFabricRoutes } from '../protocols/fabric/fabricRoutes.js';
import { HttpGuard, sendFamilyError, type AdapterErrorShapes } from '../http/httpGuards.js';
import { wireErrorFor } from '../http/wireErrors.js';
import { fabricErrorReply } from '../protocols/fabric/fabricErrors.js';
import { ampErrorResponse } from '../protocols/amp/ampMessage.js';
import { eventStreamLimits, registerEventStreamMetrics, requestDeadlines } from '../http/edgeLimits.js';
import { ANONYMOUS_CALLER, OPERATOR_CALLER, handlePublish } from '../edge/coordinator/publishRoute.js';
import { CONSOLE_PREFIX, registerConsoleAssets } from '../edge/coordinator/consoleAssets.js';
import { registerConsoleRoutes } from '../edge/coordinator/consoleRoutes.js';
import { registerInviteRoutes } from '../edge/coordinator/inviteRoutes.js';
import { UnknownTagNotices } from '../registry/unknownTagNotices.js';
import type { Disablement } from '../registry/disablements.js';
import { ownAgentAccess } from '../coordinator/calloutWiring.js';
import { EdgeAuth, ROUTE_ACCESS } from '../http/routeAccess.js';
import { loadOrCreateOperatorKey } from '../identity/operatorKey.js';
import { kvKey } from '../fabric/jetstream.js';
import type { AgentOperator } from '../edge/coordinator/consoleRoutes.js';
import type { PublishDeps } from '../edge/coordinator/publishRoute.js';
import type { CoordinatorA2aDeps } from '../protocols/a2a/index.js';
import type { CoordinatorCardSource } from '../protocols/a2a/agentCards.js';
import type { MetricsSources } from '../coordinator/metrics.js';
import type { TaskService } from '../coordinator/tasks/taskService.js';
import type { AgentDirectory } from '../registry/agentDirectory.js';
import {
  startCoordinatorRuntime,
  startCoordinatorServices,
  type CoordinatorRuntime,
  type CoordinatorServices,
  type StartCoordinatorOptions,
} from './coordinatorRuntime.js';

export type { StartCoordinatorOptions };

/** How the edge's guards refuse on the adapters' own routes, each in its adapter's shape. */
const ERROR_SHAPES: AdapterErrorShapes = {
  openai: (res, e) => sendOpenAiError(res, e),
  fabric: (res, e) => {
    const reply = fabricErrorReply(e);
    sendJson(res, reply.status, reply.body);
  },
  amp: (res, e) => {
    const amp = wireErrorFor(e.code).amp;
    sendJson(res, amp.http, ampErrorResponse(amp.code, e.message, undefined, null, amp.status));
  },
};

export interface CoordinatorHttp {
  server: Server;
  url: string;
  metrics: CoordinatorMetrics;
  /** The federated MCP catalog behind `/mcp`: the coordinator runtime's. */
  mcp: McpFederation;
  /**
   * The key operator routes take: `coordinator.api_key` when configured, else the one generated
   * into `<data-dir>/operator.key`. `amf up` hands it to its owner in the console URL it prints.
   */
  operatorKey: string;
  /**
   * The first step of a graceful stop, before in-flight work drains: no new connection, idle
   * kept-alive ones closed, and any new request refused with 503 and `Connection: close`; requests
   * already running are answered as usual. close() does this too.
   */
  stopAccepting(): void;
  close(): Promise<void>;
}

/** The narrow ports the edge takes (docs/architecture.md, "Ports"). */
export interface CoordinatorPorts {
  tasks: TaskService;
  agents: AgentDirectory;
  /** What the coordinator's card shows of it. */
  card: CoordinatorCardSource;
  a2a: CoordinatorA2aDeps;
  /** The operator's actions on agents, carried out by the coordinator that owns the registry. */
  operator: AgentOperator;
  publish: PublishDeps;
  metrics: MetricsSources;
}

/**
 * Cuts the ports from a Coordinator: the protocol adapters, the operator routes and the metrics see
 * these, never the Coordinator itself, so only the composition roots and the core touch it.
 */
export function coordinatorPorts(coordinator: Coordinator): CoordinatorPorts {
  const { config, tasks, registry: agents } = coordinator;
  const card: CoordinatorCardSource = {
    agents,
    agentId: coordinator.sender.identity,
    trustDomain: config.identity.trustDomain,
    spiffe: coordinator.identity.mode === 'spiffe',
    natsUrl: () => coordinator.advertisedNatsUrl,
  };
  return {
    tasks,
    agents,
    card,
    a2a: { tasks, agents, config, card, waiting: coordinator.stores.a2aWaiting, log: coordinator.log },
    operator: {
      approve: (agentId, expectedNkey) => coordinator.approveAgent(agentId, expectedNkey),
      disable: (agentId, from) => coordinator.disableAgent(agentId, from),
      enable: (agentId, from) => coordinator.enableAgent(agentId, from),
      // Out of the registry and the shared store; the key's enrollment goes with its binding.
      forget: async (agentId) => {
        coordinator.registry.forget(agentId);
        await coordinator.stores.agents.delete(kvKey(agentId));
        await coordinator.enrollments.settled();
      },
    },
    publish: {
      tasks,
      artifacts: coordinator.artifacts,
      encode: (event) => coordinator.bus.takeBytes(event),
      publish: (subject, bytes) => coordinator.nc.publish(subject, bytes),
      config,
    },
    metrics: { tasks, agents, fabricHealth: () => coordinator.fabricHealth },
  };
}

/** Builds the router for a coordinator. */
function buildRouter(
  coordinator: Coordinator,
  ports: CoordinatorPorts,
  hub: EventStreamHub,
  metrics: CoordinatorMetrics,
  getUrl: () => string,
  mcp: { endpoint: McpEndpoint; audit: McpAuditLog },
  isOperator: (req: IncomingMessage, url: URL) => boolean,
  unknownTags: UnknownTagNotices,
  stopping: AbortSignal,
): Router {
  const { config } = coordinator;
  const router = new Router();
  // The console: the page at `/`, its files under /console/ (both public: they hold no data).
  registerConsoleAssets(router);
  router.on('GET', '/health', (_req, res) => {
    // 503 while degraded (NATS down, or the spawned server being restarted), so a load balancer or
    // a script polling /health sees the outage; the body still says what is wrong.
    const fabric = coordinator.fabricHealth;
    sendJson(res, fabric.status === 'ok' ? 200 : 503, {
      status: fabric.status,
      version: 'af-mcp-0.1',
      amf_version: VERSION,
      instance_id: coordinator.instanceId,
      nats: {
        connected: fabric.connected,
        url: coordinator.natsUrl,
        ...(fabric.server ? { server: fabric.server } : {}),
        // The store's trouble in the server's own words (a full disk, a corrupt block).
        ...(fabric.store ? { store: fabric.store } : {}),
        // Frozen, full or silent, as this coordinator finds it (fabricCondition.ts).
        ...(fabric.responsive !== undefined ? { responsive: fabric.responsive } : {}),
        ...(fabric.jetstream !== undefined ? { jetstream: fabric.jetstream } : {}),
        ...(fabric.problem !== undefined ? { problem: fabric.problem } : {}),
        ...(fabric.disk_free_bytes !== undefined ? { disk_free_bytes: fabric.disk_free_bytes } : {}),
      },
      policy: { engine: coordinator.policy.kind, detail: coordinator.policy.detail },
      identity: { mode: coordinator.identity.mode, svid_verified: coordinator.identity.svidVerified },
      discovery: { mdns: coordinator.config.mdns.enabled, nats_heartbeats: true },
      admission: { ...coordinator.admission.stats, in_flight: coordinator.admission.inFlight },
      agents: {
        live: [...coordinator.registry.list()].filter((a) => a.status === 'live').length,
        known: coordinator.registry.list().length,
      },
      tasks: { active: ports.tasks.activeCount },
    });
  });
  const buildCard = () => coordinatorAgentCard(ports.card, getUrl());
  router.on('GET', '/.well-known/agent-card.json', cardRoute(buildCard));
  router.on('GET', '/events', (req, res, url) => hub.handle(req, res, url));
  router.on('GET', '/agents', (_req, res) =>
    sendJson(res, 200, {
      agents: coordinator.registry.list().map((a) => ({
        ...a.record,
        capability_tags: a.record.capability_tags ?? [],
        status: a.status,
        // Disabled by the operator: `status` says so, `liveness` what it would be otherwise.
        ...disabledView(coordinator.registry.disablement(a.record.agent_id), a.status),
        // Why an admitted agent is not served (its card did not load or did not match).
        ...(a.unverified ? { unverified: a.unverified } : {}),
        advertised_status: a.record.status ?? 'active',
        admitted_at: a.admittedAt,
        last_seen: new Date(a.lastSeen).toISOString(),
      })),
    }),
  );
  router.onPrefix('GET', '/tasks/', async (_req, res, url) => {
    const id = decodePathSegment(url.pathname.slice('/tasks/'.length));
    const task = ports.tasks.get(id);
    if (task) return sendJson(res, 200, taskSnapshot(task));
    throw new AmfError('NOT_FOUND', `no task ${id} is known to this coordinator`);
  });
  // The caller is the operator only when this request presented the operator key.
  router.on('POST', '/publish', (req, res, url) =>
    handlePublish(req, res, ports.publish, isOperator(req, url) ? OPERATOR_CALLER : ANONYMOUS_CALLER),
  );
  router.on('GET', '/v1/models', (_req, res) => sendJson(res, 200, listModels(ports.agents)));
  router.on('POST', '/v1/chat/completions', (req, res) =>
    handleChatCompletion(req, res, {
      tasks: ports.tasks,
      agents: ports.agents,
      requestTimeoutMs: config.openai.requestTimeoutSeconds * 1000,
      maxBodyBytes: config.openai.maxBodyBytes,
      stopping,
      onUnknownModel: (model, message) =>
        unknownTags.refused({ protocol: 'openai', requested: model, message }),
      confirmTag: (tag) => coordinator.liveness.confirmTag(tag),
      refuseUnserved: () => coordinator.condition.refuseNewTask(false),
    }),
  );
  // Federated MCP (Streamable HTTP): POST messages, GET the notification stream, DELETE a session.
  for (const method of ['POST', 'GET', 'DELETE'])
    router.on(method, '/mcp', (req, res) => mcp.endpoint.handle(req, res));
  router.on('GET', '/audit', async (_req, res, url) => {
    const limit = Number(url.searchParams.get('limit') ?? '50');
    if (!Number.isInteger(limit) || limit < 1)
      throw new AmfError('INVALID_REQUEST', 'limit must be a positive integer');
    sendJson(res, 200, { records: await mcp.audit.recent(limit) });
  });
  router.on('GET', '/metrics', async (_req, res) => {
    const text = await metrics.registry.metrics();
    res.writeHead(200, { 'content-type': metrics.registry.contentType });
    res.end(text);
  });
  return router;
}

/** How `/agents` shows an agent the operator disabled (nothing for one that is not). */
function disabledView(
  disablement: Disablement | undefined,
  liveness: string,
): { status?: 'disabled'; liveness?: string; disabled?: Disablement } {
  return disablement ? { status: 'disabled', liveness, disabled: disablement } : {};
}

/** Route label for metrics: known paths as they are, anything else collapsed. */
/** What a request gets once the coordinator has begun to stop. */
const SHUTTING_DOWN = new AmfError(
  'UNAVAILABLE',
  'the coordinator is shutting down: send the request again once it is back',
);

function routeLabel(pathname: string): string {
  if (pathname.startsWith('/tasks/')) return '/tasks/:id';
  if (pathname.startsWith('/agents/')) return '/agents/:id';
  if (pathname.startsWith(CONSOLE_PREFIX)) return '/console/:file';
  if (pathname.startsWith('/api/amp/jobs/')) return '/api/amp/jobs/:id';
  if (pathname === '/a2a') return '/a2a';
  if (pathname.startsWith('/a2a/rest/')) return '/a2a/rest';
  if (/^\/(mcp\/call|api\/amp\/(message|discover))$/.test(pathname)) return pathname;
  return ROUTE_ACCESS.some((row) => row.path === pathname) ||
    /^\/(v1\/[a-z/]+|events|events\/history|publish|agents|admissions|tools|metrics|mcp|audit)$/.test(
      pathname,
    )
    ? pathname
    : 'other';
}

/**
 * Starts the HTTP edge of a coordinator runtime on the configured host and port; it serves the
 * runtime's federation and leaves it running when it closes. Given a bare Coordinator (composed by
 * hand, as tests do), the edge starts the shared services itself and stops them when it closes.
 */
export async function startCoordinatorHttp(core: CoordinatorRuntime | Coordinator): Promise<CoordinatorHttp> {
  if (!(core instanceof Coordinator)) return serveCoordinator(core.coordinator, core, undefined);
  const owned = await startCoordinatorServices(core);
  try {
    return await serveCoordinator(core, owned, owned);
  } catch (err) {
    await owned.close();
    throw err;
  }
}

/** The edge itself; `owned`: services it started for a bare Coordinator, stopped when it closes. */
async function serveCoordinator(
  coordinator: Coordinator,
  { federation, audit }: CoordinatorServices,
  owned: { close(): Promise<void> } | undefined,
): Promise<CoordinatorHttp> {
  const { config } = coordinator;
  // Never anonymous: with no key configured, one is generated for the owner (operatorKey.ts).
  const operatorKey = config.coordinator.apiKey ?? (await loadOrCreateOperatorKey(config.dataDir));
  const auth = new EdgeAuth({ operatorKey, identity: coordinator.identity });
  const hub = new EventStreamHub(coordinator.nc, eventStreamLimits(config));
  const ports = coordinatorPorts(coordinator);
  const metrics = new CoordinatorMetrics(ports.metrics);
  registerEventStreamMetrics(metrics.registry, hub);
  let url = '';
  const mcpEndpoint = createCoordinatorMcpEndpoint(federation, VERSION, mcpSessionLimits(config));
  const isOperator = (req: IncomingMessage, u: URL) => auth.isOperator(req, u);
  // Requests refused for a model or tag nobody serves: warnings the console shows (rate-bounded).
  const unknownTags = new UnknownTagNotices(coordinator.notices);
  // Aborted when the edge closes: answers still streaming end cleanly rather than being cut.
  const stopping = new AbortController();
  // Every answer in flight listens for the stop, so more than Node's default of ten is normal here.
  setMaxListeners(0, stopping.signal);
  const router = buildRouter(
    coordinator,
    ports,
    hub,
    metrics,
    () => url,
    { endpoint: mcpEndpoint, audit },
    isOperator,
    unknownTags,
    stopping.signal,
  );
  // A2A: JSON-RPC at POST /a2a, HTTP+JSON under /a2a/rest/, tasks dispatched into the mesh.
  const a2a = createCoordinatorA2a(
    ports.a2a,
    () => url,
    (requested, message) => unknownTags.refused({ protocol: 'a2a', requested, message }),
    // A task still working when the edge stops ends with a final failed status on its stream; AMP
    // requests travel in A2A messages as an extension.
    { stopping: stopping.signal, extensions: [AMP_IN_A2A] },
  );
  a2a.server.register(router);
  // Before any request: the tasks an earlier run left waiting for their client's input go on here.
  const waitingTasks = await a2a.restoreWaiting();
  if (waitingTasks > 0)
    coordinator.log('info', 'A2A tasks waiting for input taken over', { tasks: waitingTasks });
  // AMP (also the merged A2A card / AMP manifest at /.well-known/agent.json) and Fabric /mcp/call.
  const amp = registerAmpRoutes(router, {
    tasks: ports.tasks,
    agents: ports.agents,
    config,
    selfId: () => coordinator.sender.identity,
    log: coordinator.log,
    getUrl: () => url,
    // The legacy view (0.3 fields, top-level x-amf): agent.json is read by 0.3 and AMP clients.
    card: () => legacyAgentCard(coordinatorAgentCard(ports.card, url)),
  });
  registerFabricRoutes(router, {
    tasks: ports.tasks,
    agents: ports.agents,
    config,
    federation,
    onUnknownCapability: (capability, message) =>
      unknownTags.refused({ protocol: 'fabric', requested: `capability ${capability}`, message }),
  });
  registerConsoleRoutes(router, {
    tasks: ports.tasks,
    agents: ports.agents,
    operator: ports.operator,
    federation,
    jsm: coordinator.stores.jsm,
    log: coordinator.log,
  });
  // Invites: the operator asks for one; an agent on another machine redeems it at /join.
  registerInviteRoutes(router, {
    key: coordinator.signingKey,
    store: coordinator.stores.invites,
    coordinatorUrl: () => url,
    natsUrl: () => coordinator.advertisedNatsUrl,
    notices: coordinator.notices,
    log: coordinator.log,
    enroll: async ({ nkey, tags, inviteId, expiresAt }) => {
      await coordinator.enrollKey({ nkey, tags, via: 'invite', inviteId, expiresAt });
    },
  });
  const guard = HttpGuard.fromConfig(config, ERROR_SHAPES);
  const serve = async (req: IncomingMessage, res: ServerResponse, u: URL): Promise<void> => {
    try {
      const decision = await auth.decide(req, u);
      if (!decision.ok) {
        // Drained unread: nothing of a refused request reaches a handler.
        req.resume();
        res.setHeader('www-authenticate', decision.wwwAuthenticate);
        sendFamilyError(res, u.pathname, decision.error, ERROR_SHAPES);
        return;
      }
      await router.handle(req, res, u);
    } catch (err) {
      if (u.pathname.startsWith('/v1/')) {
        if (!res.headersSent) sendOpenAiError(res, err);
        else res.end();
      } else sendError(res, err);
    }
  };
  // Set once the coordinator begins to stop: what arrives then is refused (503, connection closed).
  let refusing = false;
  const refuseNew = () => {
    refusing = true;
    stopAccepting(server);
  };
  const server = createServer(requestDeadlineOptions(requestDeadlines(config)), (req, res) => {
    const u = requestUrl(req);
    // Stopping: a request on a kept-alive connection is refused and its connection closed, never
    // accepted and then cut (docs/reliability.md, "One Ctrl-C stops it").
    if (refusing) {
      req.resume();
      res.setHeader('connection', 'close');
      if (u.pathname.startsWith('/v1/')) sendOpenAiError(res, SHUTTING_DOWN);
      else sendFamilyError(res, u.pathname, SHUTTING_DOWN, ERROR_SHAPES);
      return;
    }
    res.on('finish', () =>
      metrics.httpRequests.inc({ route: routeLabel(u.pathname), status: String(res.statusCode) }),
    );
    if (!guard.admit(req, res, u)) return;
    void serve(req, res, u);
  });
  server.keepAliveTimeout = 65_000;
  try {
    // Bound to a wildcard, the edge is named by this machine's LAN address, never 0.0.0.0.
    url = advertisedUrl(
      await listen(server, config.coordinator.host, config.coordinator.port),
      config.coordinator.host,
      config.mdns.interface ?? undefined,
    );
  } catch (err) {
    // The edge never came up: what it started is stopped (owned services by startCoordinatorHttp).
    hub.close();
    await amp.close();
    await mcpEndpoint.close();
    throw err;
  }
  coordinator.setPublicUrl(url);
  let closing: Promise<void> | undefined;
  return {
    server,
    url,
    metrics,
    mcp: federation,
    operatorKey,
    stopAccepting: refuseNew,
    close() {
      closing ??= (async () => {
        // Nothing new first: no new connection, idle kept-alive ones closed, and a request on a
        // busy one refused (above). Then an answer still streaming gets an error chunk and [DONE]
        // (OpenAI) before the server closes its connection, and every event stream a last frame
        // saying why it ends.
        refuseNew();
        // Requests still waiting for a task are answered and their tasks cancelled together first;
        // the answers settle before the stop signal, so no handler answers "stopped" for a task
        // that completed meanwhile.
        ports.tasks.endForStop();
        await new Promise((resolve) => setImmediate(resolve));
        stopping.abort();
        hub.close();
        await amp.close();
        await mcpEndpoint.close();
        await closeServer(server);
        // A runtime's federation outlives its edge; one the edge started for itself ends with it.
        await owned?.close();
      })();
      return closing;
    },
  };
}

/**
 * A coordinator process: the runtime (core and federated MCP catalog), its HTTP edge, discovery and
 * the bridged external A2A agents.
 */
export interface RunningCoordinator extends CoordinatorRuntime {
  http: CoordinatorHttp;
  url: string;
  /**
   * Stops in order: bridges, HTTP edge, the federation, then the core (which ends in-flight tasks
   * and its nats-server).
   */
  close(): Promise<void>;
}

/**
 * The coordinator's composition root: starts the core (NATS, policy, admission, lifecycle), its HTTP
 * edge, mDNS discovery and the A2A bridges of `a2a.agents`.
 */
export async function startCoordinator(options: StartCoordinatorOptions): Promise<RunningCoordinator> {
  const { config, log } = options;
  const runtime = await startCoordinatorRuntime(options);
  const { coordinator } = runtime;
  let http: CoordinatorHttp | undefined;
  try {
    http = await startCoordinatorHttp(runtime);
    await coordinator.startDiscovery(http.url);
  } catch (err) {
    await http?.close();
    await runtime.close();
    throw err;
  }
  const edge = http;
  // External A2A agents are fetched in the background: an unreachable one is logged and retried.
  const bridges = startA2aBridges({
    agents: config.a2a.agents,
    natsUrl: coordinator.natsUrl,
    // Each bridge is an agent of its own: it joins like any worker when the fabric grants agent
    // users (a spawned server, or auth callout); otherwise it is the legacy specialist.
    ...ownAgentAccess(coordinator),
    trustDomain: config.identity.trustDomain,
    heartbeatSeconds: config.heartbeat.intervalSeconds,
    selfOrigins: [http.url],
    ...(coordinator.identity.mode === 'spiffe' ? { identity: coordinator.identity } : {}),
    edgeKeys: { coordinatorKey: coordinator.signingKey.publicKey, operatorKey: http.operatorKey },
    log,
  });
  let closing: Promise<void> | undefined;
  return {
    coordinator,
    federation: runtime.federation,
    audit: runtime.audit,
    http: edge,
    url: edge.url,
    close() {
      closing ??= (async () => {
        edge.stopAccepting();
        await bridges.close();
        await edge.close();
        await runtime.close();
      })();
      return closing;
    },
  };
}
