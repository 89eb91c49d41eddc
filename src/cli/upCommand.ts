/**
 * `amf up`: the coordinator, its HTTP edge and, with `--demo`, the demo workers in the same process.
 * SIGINT/SIGTERM stop everything in order: workers drain, the coordinator ends in-flight tasks, the
 * spawned nats-server exits. The handlers are installed before anything starts, so a signal during
 * start-up stops the mesh as soon as it is up instead of killing the process with nats-server still
 * running. A second signal, or a stop that takes too long, forces the exit (the nats-server exit hook
 * still kills the server).
 */
import { createServer } from 'node:net';
import type { AmfConfig } from '../config/config.js';
import { AmfError, toAmfError } from '../errors.js';
import { startCoordinator, type RunningCoordinator } from '../apps/coordinatorApp.js';
import { createLogger } from '../log.js';
import { startWorker, type RunningWorker } from '../apps/workerApp.js';
import { loadOrCreateAgentKey } from '../identity/agentKey.js';
import { BUILTIN_HANDLERS } from './handlerLoader.js';
import { agentKeyFile } from './workerCommand.js';
import { ownAgentAccess } from '../coordinator/calloutWiring.js';
import { operatorKeyFile } from '../identity/operatorKey.js';
import { startMemoryTrimmer } from '../util/memoryTrimmer.js';
import { isLoopbackHost } from '../net/hostRules.js';

const DEMO_WORKERS = [
  { name: 'demo-echo', tags: ['echo'], handler: 'echo' },
  { name: 'demo-calc', tags: ['calc', 'math'], handler: 'calc' },
] as const;

/** In-flight demo tasks get this long to finish before they are aborted (and ended by the coordinator). */
const WORKER_DRAIN_MS = 3_000;
/** A stop that has not ended by then is forced: one Ctrl-C must end the process. */
const STOP_DEADLINE_MS = 10_000;

/** Starts the mesh and keeps it running until a signal arrives (or the coordinator cannot go on). */
export async function runUp(config: AmfConfig, options: { demo: boolean }): Promise<void> {
  const log = createLogger(config.logLevel, 'amf-coordinator');
  const trimmer = startMemoryTrimmer();
  log.debug(trimmer.description);
  let stopReason: string | undefined;
  let fatal: Error | undefined;
  let wake: (() => void) | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopReason !== undefined) {
      log.warn({ signal }, 'second signal: exiting now');
      log.flush();
      process.exit(130);
    }
    stopReason = signal;
    log.info({ signal }, 'shutting down');
    wake?.();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const removeHandlers = (): void => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };

  let running: RunningCoordinator;
  try {
    // Checked before nats-server is spawned, so a taken port costs no server start and no log lines.
    await ensurePortFree(config.coordinator.host, config.coordinator.port);
    running = await startCoordinator({
      config,
      log: (level, message, fields) => log[level](fields ?? {}, message),
      onFatal: (err) => {
        fatal = err;
        stopReason ??= 'fatal';
        wake?.();
      },
    });
  } catch (err) {
    removeHandlers();
    trimmer.stop();
    log.flush();
    // A failed start exits: whatever a half-started component left open must not keep it alive.
    setTimeout(() => process.exit(), 2_000).unref();
    throw await explainPortInUse(err, config);
  }
  const { coordinator, http } = running;
  const workers: RunningWorker[] = [];
  try {
    if (options.demo) {
      for (const demo of DEMO_WORKERS) {
        if (stopReason !== undefined) break;
        workers.push(
          await startWorker({
            name: demo.name,
            tags: [...demo.tags],
            handler: BUILTIN_HANDLERS[demo.handler]!,
            // A key kept in the data dir: the id stays bound to it across restarts (issue 12).
            key: await loadOrCreateAgentKey(agentKeyFile(config, demo.name, {})),
            natsUrl: coordinator.natsUrl,
            ...ownAgentAccess(coordinator),
            // Their edges trust the coordinator's bearer and the operator key, handed over in-process.
            coordinatorKey: coordinator.signingKey.publicKey,
            operatorKey: http.operatorKey,
            port: 0,
            trustDomain: config.identity.trustDomain,
            heartbeatSeconds: config.heartbeat.intervalSeconds,
            ...(config.mdns.enabled
              ? { mdns: config.mdns.interface ? { interfaceAddress: config.mdns.interface } : {} }
              : {}),
          }),
        );
      }
    }
    if (stopReason === undefined) {
      const lines = [
        `AMF coordinator ${http.url}`,
        // The key travels once, in the fragment: browsers never send it, so no server log holds it.
        `  console       ${http.url}/#token=${encodeURIComponent(http.operatorKey)}`,
        `  OpenAI API    ${http.url}/v1  (model amf/<tag>)`,
        `  events (SSE)  ${http.url}/events`,
        `  operator key  ${config.coordinator.apiKey ? 'as configured (AMF_API_KEY)' : operatorKeyFile(config.dataDir)} (send as Authorization: Bearer; the amf CLI reads it)`,
        `  NATS          ${coordinator.advertisedNatsUrl}`,
        // Beyond loopback, other machines join by invite (docs/lan.md).
        ...(isLoopbackHost(config.coordinator.host)
          ? []
          : [
              `  other machines  amf invite --tags <tags>   (here; then there: amf worker ... --host <its address> --invite <token>)`,
            ]),
        `  policy        ${coordinator.policy.kind} (${coordinator.policy.detail})`,
        `  discovery     ${config.mdns.enabled ? 'mDNS _amf-agent._tcp + ' : ''}NATS heartbeats`,
        ...workers.map((w) => `  demo worker   ${w.worker.agentId} at ${w.url}`),
        ...config.a2a.agents.map((a) => `  A2A agent     ${a.name} at ${a.url} (bridged when reachable)`),
      ];
      process.stdout.write(lines.join('\n') + '\n');
      await new Promise<void>((resolve) => {
        wake = resolve;
        if (stopReason !== undefined) resolve();
      });
    }
  } catch (err) {
    fatal ??= err instanceof Error ? err : toAmfError(err);
  }

  const deadline = setTimeout(() => {
    log.error({ after_ms: STOP_DEADLINE_MS }, 'shutdown did not finish in time: exiting now');
    log.flush();
    process.exit(1);
  }, STOP_DEADLINE_MS);
  deadline.unref();
  // Nothing new is taken once stopping (kept-alive connections included) while the demo workers
  // drain and requests in flight get their answers; what is still running after that is cancelled
  // and its requester told so (TaskDispatcher.endForStop), never told "stopped" and then run anyway.
  running.http.stopAccepting();
  await Promise.all([
    ...workers.map((w) => w.close(WORKER_DRAIN_MS)),
    running.coordinator.dispatcher.idle(WORKER_DRAIN_MS),
  ]);
  await running.close();
  clearTimeout(deadline);
  removeHandlers();
  trimmer.stop();
  log.flush();
  // Everything is stopped; a handle something left open (e.g. a NATS client still waiting on a
  // socket that never answered) must not keep the process alive. Unref'd: a clean exit is not delayed.
  setTimeout(() => process.exit(), 2_000).unref();
  if (fatal) throw fatal;
}

/**
 * The HTTP port is taken (another `amf up` with another data dir, or another program): one line
 * naming what answers there and the flag to use, instead of Node's bare EADDRINUSE.
 */
async function explainPortInUse(err: unknown, config: AmfConfig): Promise<unknown> {
  if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') return err;
  const { host, port } = config.coordinator;
  const probeHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  const url = `http://${probeHost.includes(':') ? `[${probeHost}]` : probeHost}:${port}`;
  let running = 'another program';
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
    const body = (await res.json()) as { instance_id?: unknown };
    if (typeof body.instance_id === 'string')
      running = `an AMF coordinator (instance ${body.instance_id} at ${url})`;
  } catch {
    // Nothing that answers like a coordinator: the generic wording stays.
  }
  return new AmfError(
    'UNAVAILABLE',
    `port ${port} on ${host} is already in use by ${running}: stop it, or choose another port with --port (0 = any free port)`,
    undefined,
    { cause: err },
  );
}

/** Rejects with the listen error (EADDRINUSE...) when host:port cannot be bound right now. */
async function ensurePortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}
