/**
 * The coordinator's task path, wired: the authenticity check of agents' events, the task lifecycle,
 * the dispatcher that runs requesters' tasks, the intake of workers' final results, and the intake of
 * agents' task events from their own subjects. Every intake point asks the same EventAuthenticity
 * (one signature check per event and intake).
 */
import type { JetStreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { AmfConfig } from '../../config/config.js';
import type { AmfEvent, EventSender } from '../../events/cloudEvent.js';
import type { EventBus } from '../../fabric/eventBus.js';
import type { WorkQueueWriter } from '../../fabric/workQueue.js';
import type { LogFn } from '../../log.js';
import type { PolicyEngine } from '../../policy/policyEngine.js';
import type { AgentRegistry } from '../../registry/agentRegistry.js';
import type { PolicyNotices } from '../../registry/policyNotices.js';
import { EventAuthenticity } from './eventAuthenticity.js';
import { adoptOrphanResult } from './orphanResults.js';
import type { TaskSnapshot } from '../sharedState.js';
import type { SharedLiveness } from '../sharedLiveness.js';
import { ResultIntake } from './resultIntake.js';
import { TaskEventIntake } from './eventIntake.js';
import { TaskDispatcher } from './dispatcher.js';
import { TaskLifecycle, type LifecycleOptions } from './lifecycle.js';
import { ed25519 } from '../../identity/ed25519.js';

export interface TaskPathParts {
  nc: NatsConnection;
  jsm: JetStreamManager;
  /** The shared task-state bucket (orphaned tasks are adopted through it). */
  tasksKv: KV;
  bus: EventBus;
  work: WorkQueueWriter;
  registry: AgentRegistry;
  notices: PolicyNotices;
  sender: EventSender;
  config: AmfConfig;
  policy: PolicyEngine;
  /** A task's last state in the shared KV bucket (SharedState.readTask). */
  readTaskState: (taskId: string) => Promise<TaskSnapshot | undefined>;
  /** The shared registry's word on agents offline here for silence (sharedLiveness.ts). */
  liveness?: Pick<SharedLiveness, 'confirmLive' | 'confirmSilence'>;
  log: LogFn;
  /** Why new tasks are refused now, if they are (LifecycleOptions.refuseNewTask). */
  refuseNewTask?: LifecycleOptions['refuseNewTask'];
}

export interface TaskPath {
  authenticity: EventAuthenticity;
  lifecycle: TaskLifecycle;
  dispatcher: TaskDispatcher;
  results: ResultIntake;
  taskEvents: TaskEventIntake;
}

/**
 * Tasks in flight from which claims' and finals' signature checks go to the thread pool, when
 * node:crypto checks them. libsodium's check (ed25519.ts) costs less than handing it to a pool
 * thread and back: inline it served more tasks a second at concurrency 64 (docs/performance.md).
 */
export const OFFLOAD_FROM_ACTIVE_TASKS = 4;
const offloadSignatureChecks = ed25519.backend === 'node:crypto';

export function createTaskPath(parts: TaskPathParts): TaskPath {
  const { nc, jsm, tasksKv, bus, work, registry, notices, sender, config, policy, log } = parts;
  // Bound below: the lifecycle is built with this checker, and before the dispatcher it asks.
  let activeTasks = (): number => 0;
  let waitsHere = (_taskId: string): boolean => false;
  const authenticity: EventAuthenticity = new EventAuthenticity({
    registry: registry,
    notices: notices,
    acceptUnsignedFromKeylessAgents: config.identity.legacyUnsignedAgents,
    onHandlerError: (err) => log('error', 'an authenticated event was not processed', { err: String(err) }),
    offload: () => offloadSignatureChecks && activeTasks() >= OFFLOAD_FROM_ACTIVE_TASKS,
  });
  const inOrder = (event: AmfEvent, intake: string, then: (ok: boolean) => void) =>
    authenticity.acceptInOrder(event, intake, then);
  const lifecycle: TaskLifecycle = new TaskLifecycle(bus, registry, sender, notices, {
    ttlSeconds: config.tasks.ttlSeconds,
    maxRetries: config.tasks.maxRetries,
    retryDelaySeconds: config.tasks.retryDelaySeconds,
    watchdogGraceFactor: config.tasks.watchdogGraceFactor,
    retainedTerminalTasks: config.tasks.retainedTerminalTasks,
    workerLossRetries: config.tasks.workerLossRetries,
    decideDelegation: (input) => policy.delegation(input),
    // A stored result counts only when it is the agent's own (the results stream is one intake).
    storedResult: async (taskId, agentId) => {
      const nkey = agentId === undefined ? undefined : registry.get(agentId)?.record.nkey;
      const event = await results.storedResult(taskId, nkey);
      return event && authenticity.accept(event, 'the results stream') ? event : undefined;
    },
    workQueue: work,
    sharedTaskState: parts.readTaskState,
    ...(parts.liveness ? livenessOptions(parts.liveness) : {}),
    authenticate: (event, intake) => authenticity.accept(event, intake),
    authenticateInOrder: inOrder,
    waitsHere: (taskId) => waitsHere(taskId),
    log,
    ...(parts.refuseNewTask ? { refuseNewTask: parts.refuseNewTask } : {}),
  });
  activeTasks = () => lifecycle.activeCount;
  const dispatcher = new TaskDispatcher(
    bus,
    lifecycle,
    (event, intake) => authenticity.accept(event, intake),
    inOrder,
  );
  waitsHere = (taskId) => dispatcher.waits(taskId);
  const taskEvents = new TaskEventIntake({
    nc,
    bus,
    registry,
    notices,
    limits: config.taskEvents,
    ownsTask: (taskId) => lifecycle.owns(taskId),
    take: (event) => lifecycle.takeAgentEvent(event),
    takeReply: (event, taskId) => dispatcher.takeReply(event, taskId),
    vouch: (event, nkey) => authenticity.vouch(event, nkey),
  });
  const results: ResultIntake = new ResultIntake({
    nc,
    senders: taskEvents,
    vouch: (event, nkey) => authenticity.vouch(event, nkey),
    jsm: jsm,
    accept: (event, arrival) =>
      authenticity.accept(
        event,
        arrival.path === 'direct' ? 'the direct final subject' : 'the results stream',
      )
        ? lifecycle.acceptResult(event, arrival)
        : 'refused',
    acceptDirect: (event, decide) =>
      inOrder(event, 'the direct final subject', (ok) =>
        decide(ok ? lifecycle.acceptResult(event, { path: 'direct', lastDelivery: false }) : 'refused'),
      ),
    recorded: (taskId) => lifecycle.get(taskId)?.recorded,
    adopt: async (event) => {
      if (!authenticity.accept(event, 'the results stream')) return 'ended';
      const verdict = await adoptOrphanResult(event, { tasks: tasksKv, bus, sender, log, agents: registry });
      if (verdict === 'adopted') lifecycle.endAdoptedCopy(event);
      return verdict;
    },
    log: (level, message, fields) => log(level, message, fields),
  });
  return { authenticity, lifecycle, dispatcher, results, taskEvents };
}

/** The lifecycle's questions to the shared registry (LifecycleOptions.confirmLive, confirmSilence). */
function livenessOptions(
  liveness: Pick<SharedLiveness, 'confirmLive' | 'confirmSilence'>,
): Pick<LifecycleOptions, 'confirmLive' | 'confirmSilence'> {
  return {
    confirmLive: (agentId) => liveness.confirmLive(agentId),
    confirmSilence: (agentId) => liveness.confirmSilence(agentId),
  };
}

/**
 * Stops the task path: no more results taken, events still waiting for their signature check
 * dropped (their workers store their finals), requesters released, in-flight tasks ended.
 */
export async function closeTaskPath(path: Omit<TaskPath, 'taskEvents'>): Promise<void> {
  await path.results.close();
  path.authenticity.close();
  path.dispatcher.close();
  path.lifecycle.close();
}
