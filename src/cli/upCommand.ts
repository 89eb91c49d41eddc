/**
 * `amf up`: the coordinator, its HTTP edge and, with `--demo`, the demo workers in the same process.
 * SIGINT/SIGTERM stop everything in order: workers drain, the coordinator ends in-flight tasks, the
 * spawned nats-server exits. The handlers are installed before anything starts, so a signal during
 * start-up stops the mesh as soon as it is up instead of killing the process with nats-server still
 * running. A second signal, or a stop that takes too long, forces the exit (the nats-server exit hook
 * still kills the server).
 */
import type { AmfConfig } from '../config/config.js';
import { startCoordinator, type RunningCoordinator } from '../apps/coordinatorApp.js';
import { createLogger } from '../log.js';
import { startWorker, type RunningWorker } from '../apps/workerApp.js';
import { BUILTIN_HANDLERS } from './handlerLoader.js';

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
    throw err;
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
            natsUrl: coordinator.natsUrl,
            credential: coordinator.credentials.specialist,
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
        `  UI            ${http.url}/`,
        `  OpenAI API    ${http.url}/v1  (model amf/<tag>)`,
        `  events (SSE)  ${http.url}/events`,
        `  NATS          ${coordinator.natsUrl}`,
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
    fatal ??= err instanceof Error ? err : new Error(String(err));
  }

  const deadline = setTimeout(() => {
    log.error({ after_ms: STOP_DEADLINE_MS }, 'shutdown did not finish in time: exiting now');
    log.flush();
    process.exit(1);
  }, STOP_DEADLINE_MS);
  deadline.unref();
  await Promise.all(workers.map((w) => w.close(WORKER_DRAIN_MS)));
  await running.close();
  clearTimeout(deadline);
  removeHandlers();
  log.flush();
  if (fatal) throw fatal;
}
