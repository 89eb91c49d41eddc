/**
 * The registry as the edge reads it: which agents are known and in what state, which capability tags
 * are served, what the operator recorded about an agent. The protocol adapters, the operator routes
 * and the metrics take this, never the whole AgentRegistry: admitting, approving, disabling and
 * forgetting agents stay with the coordinator, which owns the registry.
 */
import type { AgentRegistry } from './agentRegistry.js';

/** A read-only view of the agent registry. */
export type AgentDirectory = Pick<
  AgentRegistry,
  | 'get'
  | 'list'
  | 'isLive'
  | 'liveTags'
  | 'servesTag'
  | 'isDisabled'
  | 'disablement'
  | 'enrollment'
  | 'boundKey'
>;
