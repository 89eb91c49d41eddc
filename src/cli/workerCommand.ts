/**
 * `amf worker`: finds the fabric (flag, environment, config, or the coordinator's agent card), reads
 * the specialist credential (AMF_SPECIALIST_PASS or the shared data dir), and runs the worker until
 * SIGTERM/SIGINT, which drains it: no new claims, in-flight work finishes, then goodbye.
 */
import { readFile } from 'node:fs/promises';
import type { AmfConfig } from '../config/config.js';
import { readCredentials, ROLE_USERS, type RoleCredential } from '../fabric/credentials.js';
import { AmfError } from '../errors.js';
import { createLogger } from '../log.js';
import { startWorker } from '../apps/workerApp.js';
import { requestDeadlines } from '../apps/edgeLimits.js';
import { mcpSessionLimits } from '../protocols/mcp/mcpEndpoint.js';
import { loadHandler } from './handlerLoader.js';
import { findCoordinatorByMdns } from '../discovery/findCoordinator.js';
import { AMF_CARD_EXTENSION_URI, amfCardBlock } from '../util/amfCardBlock.js';

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

/** The specialist credential: from the environment, else from `<data-dir>/credentials.json`. */
export async function specialistCredential(
  config: AmfConfig,
  env: NodeJS.ProcessEnv = process.env,
): Promise<RoleCredential> {
  const pass = env.AMF_SPECIALIST_PASS;
  if (pass) return { user: ROLE_USERS.specialist, password: pass };
  return (await readCredentials(config.dataDir)).specialist;
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
  options: { explicitCoordinator: boolean; tlsCert?: string | undefined; tlsKey?: string | undefined },
): Promise<void> {
  const log = createLogger(config.logLevel, 'amf-worker');
  const { worker: w } = config;
  if (!w.name) throw new AmfError('INVALID_REQUEST', '--name is required');
  const tls = await readTls(options.tlsCert, options.tlsKey);
  const handler = await loadHandler(w.handler);
  const natsUrl =
    config.nats.url ??
    (await natsUrlFromCoordinator(await locateCoordinator(config, options.explicitCoordinator)));
  const credential = await specialistCredential(config);
  const running = await startWorker({
    name: w.name,
    tags: [...w.tags],
    handler,
    natsUrl,
    credential,
    host: w.host,
    port: w.port,
    trustDomain: w.trust,
    heartbeatSeconds: config.heartbeat.intervalSeconds,
    concurrency: w.concurrency,
    requestDeadlines: requestDeadlines(config),
    ...(tls ? { tls } : {}),
    mcpServers: config.mcp.servers,
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
      void running.close().then(resolve);
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
  });
  log.flush();
}
