/**
 * `amf worker`: finds the fabric (flag, environment, config, or the coordinator's agent card), loads
 * its own key and the join credential (docs/security.md), and runs the worker until
 * SIGTERM/SIGINT, which drains it: no new claims, in-flight work finishes, then goodbye.
 */
import { readFile } from 'node:fs/promises';
import type { AmfConfig } from '../config/config.js';
import { dirname, join } from 'node:path';
import { readInvite } from '../identity/inviteToken.js';
import { checkReachableHost, joinWithInvite, readMembership, writeMembership } from '../worker/inviteJoin.js';
import { readJoinCredential, ROLE_USERS } from '../fabric/credentials.js';
import { loadOrCreateAgentKey } from '../identity/agentKey.js';
import type { MeshAccess } from '../apps/workerApp.js';
import { readWorkerEdgeKeys, type WorkerEdgeKeys } from '../edge/worker/workerEdgeGate.js';
import { AmfError } from '../errors.js';
import { createLogger } from '../log.js';
import { startMemoryTrimmer } from '../util/memoryTrimmer.js';
import { startWorker } from '../apps/workerApp.js';
import { openIdentity } from '../identity/identityMode.js';
import { requestDeadlines } from '../http/edgeLimits.js';
import { mcpSessionLimits } from '../protocols/mcp/endpoint/endpoint.js';
import { loadHandler } from './handlerLoader.js';
import { findCoordinatorByMdns } from '../discovery/findCoordinator.js';
import { AMF_CARD_EXTENSION_URI, amfCardBlock } from '../util/amfCardBlock.js';
import { DEFAULT_AGENT_PORT, chooseAgentPort, explainListenFailure } from './agentPort.js';

/** Reads `nats_url` from the AMF extension of the coordinator's agent card (5 s timeout). */
export async function natsUrlFromCoordinator(coordinatorUrl: string): Promise<string> {
  const url = new URL('/.well-known/agent-card.json', coordinatorUrl);
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  } catch (err) {
    throw new AmfError(
      'UNAVAILABLE',
      `cannot reach the coordinator at ${coordinatorUrl}: ${(err as Error).message}; is \`amf up\` running?`,
    );
  }
  if (!res.ok) throw new AmfError('UNAVAILABLE', `coordinator card ${url.href} answered HTTP ${res.status}`);
  const natsUrl = amfCardBlock(await res.json())?.nats_url;
  if (typeof natsUrl !== 'string')
    throw new AmfError(
      'UNAVAILABLE',
      `coordinator card ${url.href} has no nats_url in its AMF extension (${AMF_CARD_EXTENSION_URI})`,
    );
  return natsUrl;
}

/**
 * Where an agent keeps its own key: `<data-dir>/agents/<name>/agent.nkey` (0600, directory 0700), or
 * `AMF_AGENT_KEY_FILE`. The same name finds the same key after a restart.
 */
export function agentKeyFile(config: AmfConfig, name: string, env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.AMF_AGENT_KEY_FILE;
  if (explicit) return explicit;
  if (!/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/.test(name))
    throw new AmfError('INVALID_REQUEST', `agent name ${JSON.stringify(name)} cannot name a key directory`);
  return join(config.dataDir, 'agents', name, 'agent.nkey');
}

/**
 * How an agent reaches NATS: its own key plus the join credential (`AMF_JOIN_PASS` or
 * `<data-dir>/join.json`, which holds nothing else). `AMF_SPECIALIST_PASS` opts into the legacy
 * shared specialist user instead (an external NATS, seed compatibility): the agent still signs.
 * Also whom its edge trusts: the coordinator's public key and the operator key in the data dir.
 */
export async function meshAccess(
  config: AmfConfig,
  name: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<MeshAccess & WorkerEdgeKeys> {
  const key = await loadOrCreateAgentKey(agentKeyFile(config, name, env));
  const edge = await readWorkerEdgeKeys(config.dataDir, config.coordinator.apiKey);
  const pass = env.AMF_SPECIALIST_PASS;
  if (pass) return { credential: { user: ROLE_USERS.specialist, password: pass }, key, ...edge };
  return { join: await readJoinCredential(config.dataDir, env), key, ...edge };
}

/**
 * How an agent on another machine reaches the mesh: by `--invite TOKEN` (redeemed at the coordinator
 * it names; the membership it grants is kept beside the agent's key), or by the membership an earlier
 * invite left there. Undefined when neither: the agent joins through the data dir as on one machine.
 * `bindHost` is checked first: a loopback-only edge cannot serve a coordinator elsewhere.
 */
export async function invitedAccess(
  config: AmfConfig,
  name: string,
  tags: string[],
  options: { invite?: string | undefined; bindHost: string; coordinatorUrl?: string | undefined },
): Promise<{ natsUrl: string; access: MeshAccess & WorkerEdgeKeys } | undefined> {
  const keyFile = agentKeyFile(config, name);
  const membershipFile = join(dirname(keyFile), 'membership.json');
  let membership = options.invite === undefined ? await readMembership(membershipFile) : undefined;
  if (options.invite === undefined && membership === undefined) return undefined;
  const key = await loadOrCreateAgentKey(keyFile);
  if (options.invite !== undefined) {
    const claims = await readInvite(options.invite);
    await checkReachableHost(options.bindHost, options.coordinatorUrl ?? claims.coordinatorUrl);
    membership = await joinWithInvite({
      token: options.invite,
      key,
      name,
      tags,
      ...(options.coordinatorUrl ? { coordinatorUrl: options.coordinatorUrl } : {}),
    });
    await writeMembership(membershipFile, membership);
  } else await checkReachableHost(options.bindHost, membership!.coordinatorUrl);
  const edge = await readWorkerEdgeKeys(config.dataDir, config.coordinator.apiKey);
  return {
    natsUrl: membership!.natsUrl,
    access: { key, enrolled: true, ...edge, coordinatorKey: membership!.coordinatorKey },
  };
}

/**
 * Where the coordinator is: the URL given (flag, environment or config file), else the one a
 * coordinator advertises on mDNS, else the default URL.
 */
export async function locateCoordinator(config: AmfConfig, explicit: boolean): Promise<string> {
  if (explicit || !config.mdns.enabled) return config.coordinator.url;
  try {
    return await findCoordinatorByMdns({
      timeoutMs: 5000,
      ...(config.mdns.interface ? { interfaceAddress: config.mdns.interface } : {}),
    });
  } catch {
    return config.coordinator.url;
  }
}

/** Reads `--tls-cert` and `--tls-key` (both or neither) for an HTTPS worker. */
async function readTls(
  certFile: string | undefined,
  keyFile: string | undefined,
): Promise<{ cert: Buffer; key: Buffer } | undefined> {
  if (certFile === undefined && keyFile === undefined) return undefined;
  if (!certFile || !keyFile)
    throw new AmfError('INVALID_REQUEST', '--tls-cert and --tls-key go together: give both PEM files');
  const read = (file: string, flag: string) =>
    readFile(file).catch((err: NodeJS.ErrnoException) => {
      throw new AmfError(
        'INVALID_REQUEST',
        `${flag} ${file}: cannot read (${err.code ?? err.message})`,
        undefined,
        {
          cause: err,
        },
      );
    });
  return { cert: await read(certFile, '--tls-cert'), key: await read(keyFile, '--tls-key') };
}

export async function runWorkerCommand(
  config: AmfConfig,
  options: {
    explicitCoordinator: boolean;
    tlsCert?: string | undefined;
    tlsKey?: string | undefined;
    /** `--invite TOKEN`: join another machine's mesh (worker/inviteJoin.ts). */
    invite?: string | undefined;
    /** `--port` was given: that port exactly, never another (agentPort.ts). */
    portChosen?: boolean;
  },
): Promise<void> {
  const log = createLogger(config.logLevel, 'amf-worker');
  const trimmer = startMemoryTrimmer();
  log.debug(trimmer.description);
  const { worker: w } = config;
  if (!w.name) throw new AmfError('INVALID_REQUEST', '--name is required');
  const tls = await readTls(options.tlsCert, options.tlsKey);
  // Before anything starts: a port the user chose and another program holds fails at once.
  const listenOn = await chooseAgentPort({
    host: w.host,
    port: w.port,
    chosen: options.portChosen === true || w.port !== DEFAULT_AGENT_PORT,
  });
  if (listenOn.note) process.stderr.write(`amf worker: ${listenOn.note}\n`);
  const handler = await loadHandler(w.handler);
  const invited = await invitedAccess(config, w.name, [...w.tags], {
    invite: options.invite,
    bindHost: w.host,
    ...(options.explicitCoordinator ? { coordinatorUrl: config.coordinator.url } : {}),
  });
  const natsUrl =
    config.nats.url ??
    invited?.natsUrl ??
    (await natsUrlFromCoordinator(await locateCoordinator(config, options.explicitCoordinator)));
  const access = invited?.access ?? (await meshAccess(config, w.name));
  // Decision #18: SPIFFE when a Workload API socket is there (required with AMF_IDENTITY_MODE=spiffe).
  const identity = await openIdentity(config.identity.mode, process.env, {
    log: (level, message, fields) => log[level](fields ?? {}, message),
  });
  if (identity.warning) log.warn(identity.warning);
  const running = await startWorker({
    identity,
    // A worker that can prove its SVID joins the mesh beyond this machine's trust domain.
    ...(identity.mode === 'spiffe' ? { visibility: 'mesh' as const } : {}),
    name: w.name,
    tags: [...w.tags],
    handler,
    // The handler's author sees its failures here, with the stack and the task id.
    log: (level, message, fields) => log[level](fields ?? {}, message),
    natsUrl,
    ...access,
    host: w.host,
    port: listenOn.port,
    trustDomain: w.trust,
    heartbeatSeconds: config.heartbeat.intervalSeconds,
    concurrency: w.concurrency,
    handlerTimeouts: {
      defaultSeconds: w.handlerTimeoutSeconds,
      byTag: Object.fromEntries(w.handlerTimeouts.map((t) => [t.tag, t.seconds])),
    },
    requestDeadlines: requestDeadlines(config),
    ...(tls ? { tls } : {}),
    mcpServers: config.mcp.servers,
    reexportMcpServers: config.mcp.reexportServers,
    mcpClient: { logger: log, requireTls: config.mcp.requireTls },
    mcpSessions: mcpSessionLimits(config),
    onCoordinatorFingerprintChange: (first, seen) =>
      log.warn(
        { first, seen },
        'a coordinator with another fingerprint than the first one seen called /mcp (X-AMF-Coordinator-Fingerprint)',
      ),
    ...(config.mdns.enabled
      ? { mdns: config.mdns.interface ? { interfaceAddress: config.mdns.interface } : {} }
      : {}),
  }).catch(async (err: unknown) => {
    throw await explainListenFailure(err, w.host, listenOn.port);
  });
  process.stdout.write(
    `AMF worker ${running.worker.agentId} serving ${w.tags.join(', ')} at ${running.url}\n`,
  );
  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      log.info({ signal, inFlight: running.worker.inFlightCount }, 'draining');
      void running
        .close()
        .then(() => identity.close())
        .then(() => trimmer.stop())
        .then(resolve);
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
  });
  log.flush();
}
