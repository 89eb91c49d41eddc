/**
 * What a worker says about itself: its agent id, its advertisement (AgentRecord with its `nkey`) and
 * the signed heartbeat that carries it — also sent before the worker is built, while it joins.
 */
import { createEvent, type AmfEventOf } from '../events/cloudEvent.js';
import type { AgentRecord } from '../events/agentRecord.js';
import type { AgentKey } from '../identity/agentKey.js';
import { signEvent } from '../identity/eventSignature.js';
import type { MeshWorkerOptions } from './meshWorker.js';

/** The agent id of a worker: `spiffe://<trust domain>/worker/<name>`. */
export function workerAgentId(options: Pick<MeshWorkerOptions, 'trustDomain' | 'name' | 'agentId'>): string {
  // Under SPIFFE the id is the SVID's; otherwise it follows from the trust domain and name.
  return options.agentId ?? `spiffe://${options.trustDomain}/worker/${options.name}`;
}

/** The advertisement of a worker (also sent before it is admitted, by the join loop). */
export function workerAgentRecord(
  options: MeshWorkerOptions,
  key: AgentKey,
  status: 'active' | 'draining' | 'offline',
): AgentRecord {
  const record: AgentRecord = {
    agent_id: workerAgentId(options),
    display_name: options.name.slice(0, 64),
    endpoint: options.endpoint,
    protocols_supported: ['A2A/1.0', ...(options.protocols ?? [])],
    capability_tags: options.tags,
    trust_domain: options.trustDomain,
    visibility: options.visibility ?? 'local',
    version: options.version ?? '0.1.0',
    status,
    card_url: `${options.endpoint}/.well-known/agent-card.json`,
    heartbeat_seconds: options.heartbeatSeconds,
    nkey: key.publicKey,
  };
  if (options.mcpEndpoint) record.mcp_endpoint = options.mcpEndpoint;
  return record;
}

/** A signed heartbeat carrying the worker's advertisement. */
export function workerHeartbeat(
  options: MeshWorkerOptions,
  key: AgentKey,
  status: 'active' | 'draining' | 'offline',
): AmfEventOf<'amf.discovery.agent.heartbeat'> {
  const agentId = workerAgentId(options);
  return signEvent(
    createEvent({
      type: 'amf.discovery.agent.heartbeat',
      sender: {
        identity: agentId,
        source: options.endpoint,
        role: 'specialist',
        trustDomain: options.trustDomain,
      },
      payload: workerAgentRecord(options, key, status),
    }),
    key,
  );
}
