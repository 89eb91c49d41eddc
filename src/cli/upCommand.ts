/**
 * `amf up`: the coordinator, its HTTP edge and, with `--demo`, the demo workers in the same process.
 * SIGINT/SIGTERM stop everything in order: workers drain, the coordinator ends in-flight tasks, the
 * spawned nats-server exits.
 */
import type { AmfConfig } from '../config/config.js';
import { startCoordinator } from '../apps/coordinatorApp.js';
import { createLogger } from '../log.js';
import { startWorker, type RunningWorker } from '../apps/workerApp.js';
import { BUILTIN_HANDLERS } from './handlerLoader.js';

const DEMO_WORKERS = [
  { name: 'demo-echo', tags: ['echo'], handler: 'echo' },
  { name: 'demo-calc', tags: ['calc', 'math'], handler: 'calc' },
] as const;

/** Starts the mesh and keeps it running until a signal arrives. */
export async function runUp(config: AmfConfig, options: { demo: boolean }): Promise<void> {
  const log = createLogger(config.logLevel, 'amf-coordinator');
  const running = await startCoordinator({
    config,
    log: (level, message, fields) => log[level](fields ?? {}, message),
  });
  const { coordinator, http } = running;
  const workers: RunningWorker[] = [];
  if (options.demo) {
    for (const demo of DEMO_WORKERS) {
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
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'shutting down');
      void (async () => {
        await Promise.all(workers.map((w) => w.close(10_000)));
        await running.close();
        resolve();
      })();
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
  });
  log.flush();
}
