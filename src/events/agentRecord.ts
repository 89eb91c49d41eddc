/**
 * The agent record of schema 1.1.0: what an agent advertises about itself over mDNS. The TXT record
 * carries it in short keys (`id`, `ep`, `proto`, ...); discovery maps those to this shape and
 * `validateAgentRecord` (validateEvent.ts) checks it against the schema.
 */
import type { Visibility } from './eventTypes.js';

/** Agent lifecycle as advertised: SPEC v0.2's `degraded` and schema 1.0.0's `draining` together. */
export const AGENT_STATUSES = ['active', 'degraded', 'draining', 'offline'] as const;
/** One of AGENT_STATUSES; `degraded` still serves, `draining` finishes its tasks but claims no more. */
export type AgentStatus = (typeof AGENT_STATUSES)[number];

/** How quickly the agent answers, as the agent itself claims (a routing hint, not a guarantee). */
export type LatencyClass = 'realtime' | 'fast' | 'batch';
/** What a call costs, as the agent itself claims (a routing hint). */
export type CostClass = 'free' | 'low' | 'high';

/**
 * An agent advertisement (schema `https://amf.spec/schemas/agent-record/1.1.0`). Only `agent_id`,
 * `endpoint` and `protocols_supported` are required; `mcp_endpoint` becomes required when a
 * protocol is `MCP/...` (docs/decisions.md #1).
 */
export interface AgentRecord {
  /** SPIFFE ID or W3C DID. */
  agent_id: string;
  display_name?: string;
  /** Base URL of the agent's A2A and MCP endpoints. */
  endpoint: string;
  /** `A2A|MCP|AMP` slash version, e.g. `A2A/1.0`, `MCP/2025-11-25`. */
  protocols_supported: string[];
  /** Tags matching `[a-z0-9-]+`, at most 64 characters each. */
  capability_tags?: string[];
  trust_domain?: string;
  visibility?: Visibility;
  subscription_topics?: string[];
  publish_topics?: string[];
  latency_class?: LatencyClass;
  cost_class?: CostClass;
  auth_requirements?: Record<string, unknown>;
  /** `major.minor.patch`. */
  version?: string;
  status?: AgentStatus;
  /** URL of the full A2A agent card. */
  card_url?: string;
  /** Heartbeat interval in seconds, 1..3600. */
  heartbeat_seconds?: number;
  /** MCP Streamable HTTP endpoint. */
  mcp_endpoint?: string;
  /** Stands for agent_id in MCP tool names (`[A-Za-z0-9_.-]{1,64}`). */
  tool_alias?: string;
  /**
   * The agent's own NATS nkey public key (`U…`, TXT key `nk`): bound to `agent_id` at admission, it
   * is the agent's NATS user and the key its events must be signed with (docs/security.md).
   */
  nkey?: string;
}
