/**
 * Starts a complete worker: HTTP edge first (so the advertised endpoint is the bound one), then the
 * NATS connection as the specialist role, then the mesh side. `close()` drains gracefully.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import { connectAs, drainOrClose, RECONNECT_FOREVER } from '../fabric/connect.js';
import type { RoleCredential } from '../fabric/credentials.js';
import { isCapabilityTag } from '../events/subjects.js';
import { AmfError } from '../errors.js';
import type { HandlerTimeouts } from '../worker/handlerTimeout.js';
import { MeshWorker, workerHeartbeat, type MeshWorkerOptions } from '../worker/meshWorker.js';
import { joinFabric } from '../worker/joinFabric.js';
import { createEphemeralAgentKey, type AgentKey } from '../identity/agentKey.js';
import { agentRecordToTxt } from '../discovery/txtRecord.js';
import { startMdnsAdvertiser, type MdnsAdvertiser } from '../discovery/mdns/advertiser.js';
import type { WorkerHandler } from '../worker/handlerApi.js';
import type { LogFn } from '../log.js';
import { createRouterServer, workerRouter, type WorkerHttpOptions } from '../edge/worker/workerHttp.js';
import { addSvidProofRoute } from '../http/svidGate.js';
import { workerEdgeGate, type WorkerEdgeKeys } from '../edge/worker/workerEdgeGate.js';
import type { IdentityProvider } from '../identity/identityProvider.js';
import { closeServer, listen } from '../http/httpServer.js';
import type { RequestDeadlines, Router } from '../http/httpKit.js';
import { createWorkerMcpEndpoint } from '../protocols/mcp/worker/endpoint.js';
import { MCP_PROTOCOL, type McpSessionLimits } from '../protocols/mcp/endpoint/endpoint.js';
import { CoordinatorFingerprintRecord } from '../protocols/mcp/coordinatorFingerprint.js';
import type { McpServerConfig } from '../config/config.js';
import { McpClientHub, type McpClientHubOptions } from '../mcpClient/mcpClientHub.js';
import { bindTaskTools } from '../mcpClient/taskTools.js';
import { mergeSurfaces, reexportSurface } from '../worker/reexportMcp.js';

export interface StartWorkerOptions extends WorkerEdgeKeys {
  name: string;
  tags: string[];
  handler: WorkerHandler;
  natsUrl: string;
  /**
   * How this agent reaches NATS. `join` (the default of `amf worker`): the join credential, which
   * can only advertise; once admitted the agent connects as its own nkey user (its `key`).
   * `credential`: a shared role password (legacy `specialist`, seed compatibility; docs/security.md).
   */
  credential?: RoleCredential;
  join?: RoleCredential;
  /**
   * `enrolled`: the agent's key was enrolled by an invite (worker/inviteJoin.ts) or the operator's
   * approval: it connects as its own nkey user at once and heartbeats there, with no join user.
   */
  enrolled?: boolean;
  /** The agent's own key (identity/agentKey.ts); default: a key for this process only. */
  key?: AgentKey;
  /** How long to wait to be admitted when joining (default 60 s). */
  admissionTimeoutMs?: number;
  host?: string;
  port?: number;
  trustDomain?: string;
  heartbeatSeconds?: number;
  concurrency?: number;
  /** How long a handler may run, by default and per tag (worker/handlerTimeout.ts; default 600 s). */
  handlerTimeouts?: HandlerTimeouts;
  version?: string;
  /** Advertise on mDNS (`_amf-agent._tcp`); absent = NATS heartbeats only. */
  mdns?: { interfaceAddress?: string };
  /** The worker's log: handler failures (with stack and task id) and empty answers go there. */
  log?: LogFn;
  /** Serve the handler as an MCP tool at `/mcp` (default true). */
  mcp?: boolean;
  /** Short tool alias announced in the card (`x-amf.tool_alias`). */
  toolAlias?: string;
  /** Adds routes to the worker's HTTP server (an AFM agent's interfaces: `/chat`, `/webhook`, `/`). */
  routes?: (router: Router) => void;
  /** How long a client may take to send a request (default 10 s headers, 30 s whole request); 408 after. */
  requestDeadlines?: RequestDeadlines;
  /** Serve HTTPS with this PEM certificate and key: endpoint, card and MCP URL become https://. */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** MCP servers whose tools handlers get as `ctx.tools` (`mcp.servers` in amf.yaml). */
  mcpServers?: readonly McpServerConfig[];
  /** Options of the MCP client hub (logger, require_tls, environment for stdio servers). */
  mcpClient?: McpClientHubOptions;
  /**
   * Also serve the tools, resources and prompts of `mcpServers` on the worker's `/mcp` (so the
   * coordinator federates them): worker/reexportMcp.ts. Default false.
   */
  reexportMcpServers?: boolean;
  /** Told when a coordinator calls `/mcp` with another fingerprint than the first one seen. */
  onCoordinatorFingerprintChange?: (first: string, seen: string) => void;
  /** Bounds of the `/mcp` session table (config `mcp.session_idle_seconds`, `mcp.max_sessions*`). */
  mcpSessions?: McpSessionLimits;
  /**
   * Under SPIFFE (`mode: 'spiffe'`): every call but discovery needs a JWT-SVID bearer for this agent
   * (audience `spiffeAudience`, default the SVID's SPIFFE ID), and the SVID proof is answered.
   */
  identity?: IdentityProvider;
  spiffeAudience?: string;
  /** Advertised visibility (default local; mesh/public are admitted only with a proven SVID). */
  visibility?: 'local' | 'mesh' | 'public';
}

/** How an agent reaches NATS (see {@link StartWorkerOptions}): passed through by the other apps. */
export interface MeshAccess {
  credential?: RoleCredential;
  join?: RoleCredential;
  enrolled?: boolean;
  key?: AgentKey;
}

/** The edge keys of `opts`, without undefined ones (exactOptionalPropertyTypes). */
export function edgeKeysOf(opts: WorkerEdgeKeys): WorkerEdgeKeys {
  return {
    ...(opts.coordinatorKey ? { coordinatorKey: opts.coordinatorKey } : {}),
    ...(opts.operatorKey ? { operatorKey: opts.operatorKey } : {}),
  };
}

/** The access fields of `opts`, without undefined ones (exactOptionalPropertyTypes). */
export function meshAccessOf(opts: MeshAccess): MeshAccess {
  return {
    ...(opts.credential ? { credential: opts.credential } : {}),
    ...(opts.join ? { join: opts.join } : {}),
    ...(opts.enrolled ? { enrolled: true } : {}),
    ...(opts.key ? { key: opts.key } : {}),
  };
}

export interface RunningWorker {
  worker: MeshWorker;
  url: string;
  nc: NatsConnection;
  /** The worker's MCP client hub (its configured MCP servers), when it has any. */
  mcpClients?: McpClientHub;
  /** The coordinator fingerprint first seen on `/mcp` (X-AMF-Coordinator-Fingerprint). */
  coordinatorFingerprint: CoordinatorFingerprintRecord;
  /** Graceful stop: stop claiming, finish in-flight tasks, say goodbye, close. */
  close(drainTimeoutMs?: number): Promise<void>;
}

/** Validates options, then starts the worker's HTTP server and mesh side. */
export async function startWorker(opts: StartWorkerOptions): Promise<RunningWorker> {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(opts.name))
    throw new AmfError(
      'INVALID_REQUEST',
      `invalid worker name "${opts.name}": expected [A-Za-z0-9._-]{1,64}`,
    );
  if (opts.tags.length === 0)
    throw new AmfError('INVALID_REQUEST', 'a worker needs at least one capability tag (--tags)');
  for (const tag of opts.tags)
    if (!isCapabilityTag(tag))
      throw new AmfError('INVALID_REQUEST', `invalid capability tag "${tag}": expected [a-z0-9-]+`);
  const spiffe = opts.identity?.mode === 'spiffe' ? opts.identity : undefined;
  if (
    [opts.credential !== undefined, opts.join !== undefined, opts.enrolled === true].filter(Boolean)
      .length !== 1
  )
    throw new AmfError(
      'INVALID_REQUEST',
      'a worker needs exactly one of a join credential, a role credential or an enrolled key',
    );
  // Under SPIFFE the worker is who its SVID says, in the SVID's trust domain.
  const trustDomain = spiffe?.trustDomain ?? opts.trustDomain ?? 'local';
  const key = opts.key ?? createEphemeralAgentKey();
  const httpOpts: WorkerHttpOptions = {
    host: opts.host ?? '127.0.0.1',
    port: opts.port ?? 8766,
    name: opts.name,
    tags: opts.tags,
    trustDomain,
    handler: opts.handler,
    version: opts.version ?? '0.1.0',
    ...(opts.toolAlias ? { toolAlias: opts.toolAlias } : {}),
    ...(spiffe ? { spiffe: true } : {}),
  };
  const coordinatorFingerprint = new CoordinatorFingerprintRecord(opts.onCoordinatorFingerprintChange);
  // Never rejects: a server that cannot be reached is logged and listed in hub.failures.
  const hub = opts.mcpServers?.length
    ? await McpClientHub.connect(opts.mcpServers, opts.mcpClient)
    : undefined;
  const handler: WorkerHandler =
    hub && opts.reexportMcpServers
      ? { ...opts.handler, mcp: mergeSurfaces(opts.handler.mcp, await reexportSurface(hub)) }
      : opts.handler;
  // Bind first: the worker is named by its real endpoint (port 0 = any free port).
  const edge = createRouterServer(opts.tls, opts.requestDeadlines);
  const server = edge.server;
  let endpoint: string;
  let nc: NatsConnection;
  let joinNc: NatsConnection | undefined;
  const serveMcp = opts.mcp !== false;
  let workerOptions: MeshWorkerOptions;
  try {
    endpoint = await listen(server, httpOpts.host, httpOpts.port);
    workerOptions = {
      name: opts.name,
      tags: opts.tags,
      trustDomain,
      endpoint,
      handler,
      heartbeatSeconds: opts.heartbeatSeconds ?? 5,
      ...(opts.visibility ? { visibility: opts.visibility } : {}),
      ...(spiffe?.agentId ? { agentId: spiffe.agentId } : {}),
      concurrency: opts.concurrency ?? 16,
      ...(opts.handlerTimeouts ? { handlerTimeouts: opts.handlerTimeouts } : {}),
      version: httpOpts.version,
      key,
      ...(opts.log ? { log: opts.log } : {}),
      ...(hub ? { tools: (signal: AbortSignal) => bindTaskTools(hub, signal) } : {}),
      // docs/decisions.md #1: announcing MCP/ requires the mcp= URL, so both come together.
      ...(serveMcp ? { protocols: [MCP_PROTOCOL], mcpEndpoint: `${endpoint}/mcp` } : {}),
    };
    // Its own NATS user (joined or enrolled): task events and stored results on its key's subjects.
    if (opts.join || opts.enrolled) workerOptions.ownSubjects = true;
    // Reconnects forever: a NATS outage of any length must end with the worker back in the mesh.
    if (opts.join) {
      joinNc = await connectAs(opts.natsUrl, opts.join, `amf-join-${opts.name}`, RECONNECT_FOREVER);
      workerOptions.heartbeatConnection = joinNc;
    }
    // An enrolled key is its own user from the start: dial it (the grant may take a reload to land).
    nc =
      joinNc ??
      (opts.enrolled
        ? await joinFabric({
            natsUrl: opts.natsUrl,
            key,
            name: `amf-worker-${opts.name}`,
            ...(opts.admissionTimeoutMs !== undefined ? { timeoutMs: opts.admissionTimeoutMs } : {}),
          })
        : await connectAs(opts.natsUrl, opts.credential!, `amf-worker-${opts.name}`, RECONNECT_FOREVER));
  } catch (err) {
    await joinNc?.close();
    await hub?.close();
    await closeServer(server);
    throw err;
  }
  const worker = new MeshWorker(nc, workerOptions);
  if (serveMcp)
    httpOpts.mcp = createWorkerMcpEndpoint({
      coordinatorFingerprint,
      handler,
      tag: opts.tags[0]!,
      version: httpOpts.version,
      getWorker: () => worker,
      ...(opts.mcpSessions ? { sessions: opts.mcpSessions } : {}),
    });
  const router = workerRouter(worker, httpOpts, endpoint);
  opts.routes?.(router);
  if (spiffe) addSvidProofRoute(router, spiffe);
  // `/tasks/send` takes the coordinator's bearer, the operator key or an SVID; `/a2a` and `/mcp`
  // are open on loopback only (edge/worker/workerEdgeGate.ts).
  edge.serve(
    router,
    workerEdgeGate({
      agentId: worker.agentId,
      ...edgeKeysOf(opts),
      ...(spiffe
        ? {
            spiffe: { identity: spiffe, ...(opts.spiffeAudience ? { audience: opts.spiffeAudience } : {}) },
          }
        : {}),
    }),
  );
  if (joinNc) {
    // Built and served (the coordinator checks the card and lists the MCP tools at admission), the
    // agent now advertises over the join connection until its own NATS user is granted.
    try {
      nc = await joinFabric({
        natsUrl: opts.natsUrl,
        joinConnection: joinNc,
        key,
        name: `amf-worker-${opts.name}`,
        heartbeat: () => workerHeartbeat(workerOptions, key, 'active'),
        ...(opts.admissionTimeoutMs !== undefined ? { timeoutMs: opts.admissionTimeoutMs } : {}),
      });
    } catch (err) {
      await joinNc.close();
      await httpOpts.mcp?.close();
      await hub?.close();
      await closeServer(server);
      throw err;
    }
    worker.useConnection(nc);
  }
  await worker.start();
  let advertiser: MdnsAdvertiser | undefined;
  if (opts.mdns) {
    try {
      advertiser = await startMdnsAdvertiser({
        instanceName: opts.name,
        port: Number(new URL(endpoint).port),
        txt: agentRecordToTxt(worker.agentRecord()),
        ...(opts.mdns.interfaceAddress ? { interfaceAddress: opts.mdns.interfaceAddress } : {}),
      });
    } catch (err) {
      await worker.drain(0);
      await nc.close();
      await joinNc?.close();
      await hub?.close();
      await closeServer(server);
      throw err;
    }
  }
  let closing: Promise<void> | undefined;
  return {
    worker,
    url: endpoint,
    nc,
    ...(hub ? { mcpClients: hub } : {}),
    coordinatorFingerprint,
    close(drainTimeoutMs = 30_000) {
      closing ??= (async () => {
        // Say "draining" on mDNS too, then goodbye once in-flight work is done.
        advertiser?.update(agentRecordToTxt(worker.agentRecord('draining')));
        await worker.drain(drainTimeoutMs);
        await advertiser?.close();
        // Bounded: with NATS unreachable a drain would never end.
        await drainOrClose(nc, 2_000);
        if (joinNc) await drainOrClose(joinNc, 2_000);
        await httpOpts.mcp?.close();
        await hub?.close();
        await closeServer(server);
      })();
      return closing;
    },
  };
}
