/**
 * A coordinator's task lifecycle for tests that drive it over a real NATS: the real in-memory agent
 * registry with the agents the test admits, and lifecycle options with test defaults.
 */
import type { TaskSnapshot } from '../../src/coordinator/sharedState.js';
import { TaskLifecycle, type TaskNotices } from '../../src/coordinator/tasks/lifecycle.js';
import type { LifecycleOptions, TaskFabric } from '../../src/coordinator/tasks/record.js';
import { EventAuthenticity } from '../../src/coordinator/tasks/eventAuthenticity.js';
import type { AmfEvent, EventSender } from '../../src/events/cloudEvent.js';
import type { AgentKey } from '../../src/identity/agentKey.js';
import type { PolicyNotices } from '../../src/registry/policyNotices.js';
import { AgentRegistry } from '../../src/registry/agentRegistry.js';

/** A registry with each agent (id → its capability tags) admitted and live, bound to `keys[id]` if given. */
export function registryWith(
  agents: Record<string, string[]>,
  keys: Record<string, AgentKey> = {},
): AgentRegistry {
  const registry = new AgentRegistry({ defaultHeartbeatSeconds: 5, offlineAfterMissed: 3 });
  for (const [agentId, tags] of Object.entries(agents))
    registry.admit({
      agent_id: agentId,
      endpoint: 'http://127.0.0.1:9',
      protocols_supported: ['A2A/1.0'],
      capability_tags: tags,
      ...(keys[agentId] ? { nkey: keys[agentId].publicKey } : {}),
    });
  return registry;
}

/** The coordinator's real signature check over `registry`, as the lifecycle's `authenticate`. */
export function realAuthenticity(
  registry: AgentRegistry,
  notices: TaskNotices,
): (event: AmfEvent, intake: string) => boolean {
  const authenticity = new EventAuthenticity({ registry, notices: notices as PolicyNotices });
  return (event, intake) => authenticity.accept(event, intake);
}

/** A lifecycle with a 30 s TTL, no retries and every delegation allowed, unless `options` say otherwise. */
export function testLifecycle(
  bus: TaskFabric,
  registry: AgentRegistry,
  sender: EventSender,
  notices: TaskNotices,
  options: Partial<LifecycleOptions> = {},
): TaskLifecycle {
  return new TaskLifecycle(bus, registry, sender, notices, {
    ttlSeconds: 30,
    maxRetries: 0,
    retryDelaySeconds: 0,
    watchdogGraceFactor: 2,
    retainedTerminalTasks: 100,
    decideDelegation: () => Promise.resolve({ allow: true, reasons: [], max_depth: 5 }),
    ...options,
  });
}

/** A task's shared state (KV) as its coordinator last wrote it: `echo`, attempt 1, open. */
export function openTaskSnapshot(taskId: string, claimedBy?: string): TaskSnapshot {
  return {
    task_id: taskId,
    tag: 'echo',
    state: claimedBy ? 'claimed' : 'announced',
    trace_id: taskId,
    attempt: 1,
    created_at: new Date().toISOString(),
    ...(claimedBy ? { claimed_by: claimedBy } : {}),
  };
}
