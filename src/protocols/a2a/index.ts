/**
 * A2A servers of the coordinator and of workers, ready to register on their httpKit Routers.
 */
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import type { KV } from '@nats-io/kv';
import type { AmfConfig } from '../../config/config.js';
import type { LogFn } from '../../log.js';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import type { MeshWorker } from '../../worker/meshWorker.js';
import { A2aServer } from './a2aServer.js';
import {
  coordinatorAgentCard,
  workerAgentCard,
  type CoordinatorCardSource,
  type WorkerCardOptions,
} from './agentCards.js';
import { BoundedTaskStore } from './boundedTaskStore.js';
import { CoordinatorExecutor, type CoordinatorExecutorOptions } from './coordinatorExecutor.js';
import { WorkerExecutor } from './workerExecutor.js';
import { WaitingTasks } from './waitingTasks.js';
import type { A2aExtension } from './a2aExtension.js';

export { A2aServer } from './a2aServer.js';
export { BoundedTaskStore } from './boundedTaskStore.js';
export { CoordinatorExecutor } from './coordinatorExecutor.js';
export { WorkerExecutor } from './workerExecutor.js';
export type { A2aExtension, ExtensionRoute } from './a2aExtension.js';
export * from './agentCards.js';

/** Default size of a worker's task store (workers keep fewer tasks than the coordinator). */
const WORKER_TASK_STORE_SIZE = 1000;

export interface CoordinatorA2a {
  server: A2aServer;
  executor: CoordinatorExecutor;
  store: BoundedTaskStore;
  /**
   * Opens the bucket of tasks waiting for input (waitingTasks.ts) and takes over those an earlier
   * run left; resolves with how many wait on. Until it is called, nothing is kept across a restart.
   */
  restoreWaiting(): Promise<number>;
}

/** What the coordinator's A2A server needs: the mesh's tasks and agents, never the Coordinator. */
export interface CoordinatorA2aDeps {
  tasks: CoordinatorExecutorOptions['tasks'];
  agents: AgentDirectory;
  config: AmfConfig;
  /** The coordinator's card (coordinatorAgentCard). */
  card: CoordinatorCardSource;
  /** The bucket of tasks waiting for their client's input (waitingTasks.ts). */
  waiting: KV;
  log: LogFn;
}

/** The coordinator's A2A server: tasks dispatched into the mesh. `getUrl` is its bound base URL. */
export function createCoordinatorA2a(
  deps: CoordinatorA2aDeps,
  getUrl: () => string,
  onUnrouted?: (requested: string, message: string) => void,
  /**
   * `stopping`: aborted when the edge stops (CoordinatorExecutorOptions.stopping); `extensions`: the
   * A2A extensions messages may carry requests of (AMP), from the composition root.
   */
  options: { lightSendMessage?: boolean; stopping?: AbortSignal; extensions?: readonly A2aExtension[] } = {},
): CoordinatorA2a {
  const { config } = deps;
  const store = new BoundedTaskStore(config.a2a.taskStoreSize);
  const executor = new CoordinatorExecutor({
    store,
    tasks: deps.tasks,
    agents: deps.agents,
    requestTimeoutMs: config.openai.requestTimeoutSeconds * 1000,
    inputTtlMs: config.a2a.inputTtlSeconds * 1000,
    defaultAgent: config.a2a.defaultAgent,
    ...(onUnrouted ? { onUnrouted } : {}),
    ...(options.stopping ? { stopping: options.stopping } : {}),
    ...(options.extensions ? { extensions: options.extensions } : {}),
    log: deps.log,
    owner: `${hostname()}:${resolve(config.dataDir)}`,
  });
  const server = new A2aServer({
    card: () => coordinatorAgentCard(deps.card, getUrl()),
    executor,
    store,
    maxBodyBytes: config.openai.maxBodyBytes,
    admit: (params, context) => executor.admit(params, context),
    awaitsInput: (taskId) => executor.awaitsInput(taskId),
    ...(options.lightSendMessage === false ? { lightSendMessage: false } : {}),
  });
  const restoreWaiting = async (): Promise<number> => executor.restoreWaiting(new WaitingTasks(deps.waiting));
  return { server, executor, store, restoreWaiting };
}

/** A worker's A2A server: tasks run by its own handler. */
export function createWorkerA2a(
  getWorker: () => MeshWorker,
  opts: WorkerCardOptions,
  getEndpoint: () => string,
  maxBodyBytes: number,
  taskStoreSize = WORKER_TASK_STORE_SIZE,
): { server: A2aServer; executor: WorkerExecutor; store: BoundedTaskStore } {
  const store = new BoundedTaskStore(taskStoreSize);
  const executor = new WorkerExecutor({ store, worker: getWorker, tags: opts.tags });
  const server = new A2aServer({
    card: () => workerAgentCard(getWorker(), opts, getEndpoint()),
    executor,
    store,
    maxBodyBytes,
    admit: (params) => executor.admit(params),
    awaitsInput: (taskId) => executor.awaitsInput(taskId),
  });
  return { server, executor, store };
}
