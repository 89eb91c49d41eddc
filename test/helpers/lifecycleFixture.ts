/**
 * A coordinator's task lifecycle for tests that drive it over a real NATS: the real in-memory agent
 * registry with the agents the test admits, and lifecycle options with test defaults.
 */
import { TaskLifecycle, type TaskNotices } from '../../src/coordinator/taskLifecycle.js';
import type { LifecycleOptions, TaskFabric } from '../../src/coordinator/taskRecord.js';
import type { EventSender } from '../../src/events/cloudEvent.js';
import { AgentRegistry } from '../../src/registry/agentRegistry.js';

/** A registry with each agent (id → its capability tags) admitted and live. */
export function registryWith(agents: Record<string, string[]>): AgentRegistry {
  const registry = new AgentRegistry({ defaultHeartbeatSeconds: 5, offlineAfterMissed: 3 });
  for (const [agentId, tags] of Object.entries(agents))
    registry.admit({
      agent_id: agentId,
      endpoint: 'http://127.0.0.1:9',
      protocols_supported: ['A2A/1.0'],
      capability_tags: tags,
    });
  return registry;
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
