/**
 * The coordinator without an HTTP edge: the core (Coordinator.start, which also forgets the agents
 * forgotten through another coordinator) and the federated MCP catalog of the admitted agents' tools,
 * with the audit log of its calls. Every edge serves this one federation (`/mcp`, Fabric's
 * `/mcp/call`, the console), and an embedder that starts no edge still has it. It is built here, in
 * the composition layer, because it comes from protocols/mcp, which the core may not import
 * (docs/architecture.md).
 */
import { Coordinator } from '../coordinator/coordinator.js';
import type { AmfConfig } from '../config/config.js';
import type { IdentityProvider } from '../identity/identityProvider.js';
import type { LogFn } from '../log.js';
import { McpFederation } from '../protocols/mcp/federation/federation.js';
import { McpAuditLog } from '../protocols/mcp/federation/audit.js';
import { TlsPinStore } from '../protocols/mcp/federation/tlsPins.js';
import { loadCoordinatorFingerprint } from '../protocols/mcp/coordinatorFingerprint.js';
import { coordinatorCallCredentials, type McpCallCredentials } from '../protocols/mcp/federation/callAuth.js';
import { VERSION } from '../version.js';

export interface StartCoordinatorOptions {
  config: AmfConfig;
  log: LogFn;
  /** Told when the coordinator cannot go on (its nats-server keeps dying); see CoordinatorOptions. */
  onFatal?: (err: Error) => void;
}

/** The services a coordinator's edges share, started on a running core. */
export interface CoordinatorServices {
  /** The federated MCP catalog: follows the registry until close(). */
  readonly federation: McpFederation;
  /** Where every federated call is recorded (the audit stream), read back by `GET /audit`. */
  readonly audit: McpAuditLog;
}

/** A running coordinator core with its shared services (see {@link startCoordinatorRuntime}). */
export interface CoordinatorRuntime extends CoordinatorServices {
  readonly coordinator: Coordinator;
  /** Stops the federation, then the core (which ends in-flight tasks and its nats-server). */
  close(): Promise<void>;
}

/**
 * Starts the shared services on `coordinator`, a core already started; their close() stops the
 * federation and leaves the core running.
 */
export async function startCoordinatorServices(
  coordinator: Coordinator,
): Promise<CoordinatorServices & { close(): Promise<void> }> {
  const { config } = coordinator;
  const audit = new McpAuditLog(
    coordinator.nc,
    coordinator.stores.jsm,
    (err) => coordinator.log('warn', 'MCP audit record not stored yet, will try again', { err: String(err) }),
    {
      // The last resort after every retry failed: the whole record in the log, not lost silently.
      onLost: (record, err) =>
        coordinator.log('error', 'MCP audit record could not be stored', { err: String(err), record }),
    },
  );
  const federation = new McpFederation({
    registry: coordinator.registry,
    policy: coordinator.policy,
    notices: coordinator.notices,
    audit,
    version: VERSION,
    pins: new TlsPinStore(coordinator.stores.mcpPins),
    coordinatorFingerprint: await loadCoordinatorFingerprint(config.dataDir),
    log: (level, message, fields) => coordinator.log(level, message, fields),
    // Worker edges take a JWT-SVID under SPIFFE, else the coordinator's own signed bearer.
    credentials:
      coordinator.identity.mode === 'spiffe'
        ? spiffeCallCredentials(coordinator.identity)
        : coordinatorCallCredentials(coordinator.signingKey),
    bareNames: config.mcp.bareNames,
  });
  federation.start();
  return { federation, audit, close: () => federation.close() };
}

/**
 * Starts a coordinator with no HTTP edge: the core and the federated MCP catalog. Workers join it
 * over NATS; `startCoordinator` (coordinatorApp.ts) adds the edge, mDNS and the A2A bridges.
 */
export async function startCoordinatorRuntime(options: StartCoordinatorOptions): Promise<CoordinatorRuntime> {
  const coordinator = await Coordinator.start({
    config: options.config,
    log: options.log,
    ...(options.onFatal ? { onFatal: options.onFatal } : {}),
  });
  let services: Awaited<ReturnType<typeof startCoordinatorServices>>;
  try {
    services = await startCoordinatorServices(coordinator);
  } catch (err) {
    await coordinator.close();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    coordinator,
    federation: services.federation,
    audit: services.audit,
    close() {
      closing ??= (async () => {
        await services.close();
        await coordinator.close();
      })();
      return closing;
    },
  };
}

/**
 * The SPIFFE tier of MCP call authentication: a JWT-SVID for the agent's SPIFFE ID as bearer on
 * every call (the provider caches each token until half its lifetime, so this is cheap).
 */
function spiffeCallCredentials(identity: IdentityProvider): McpCallCredentials {
  return {
    kind: 'spiffe',
    headersFor: async (agentId) => ({ authorization: `Bearer ${await identity.jwtSvid([agentId])}` }),
  };
}
