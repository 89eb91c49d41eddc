/**
 * Disabled agents: the operator's "no new work for this one" (`amf agents disable`, the console's
 * Disable button, `POST /agents/<id>/disable`). A disabled agent stays admitted and connected, keeps
 * its NATS user and finishes the tasks it holds, but is offered no new work, its claims are refused,
 * and no protocol edge routes to it (OpenAI models, A2A and AMP routing, the MCP federation, Fabric
 * calls). The record is kept by agent id in the shared `amf_disabled_agents` bucket
 * (coordinator/disablementStore.ts), so it holds across coordinators and restarts, until the
 * operator enables the agent or forgets it.
 */

/** One disabled agent, as it is kept (and stored, keyed by the agent id). */
export interface Disablement {
  agent_id: string;
  /** Who disabled it: `operator` (the operator key is the only credential the route takes). */
  by: string;
  /** Where the request came from (the socket's peer address), for the audit trail. */
  from?: string;
  disabled_at: string;
}

/** Upper bound on an agent id kept here (the `/agents/<id>` routes take no longer ones). */
const MAX_ID_CHARS = 512;
/** Upper bound on the `by` and `from` fields read back from the shared bucket. */
const MAX_FIELD_CHARS = 200;

function boundedString(value: unknown, max: number): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= max;
}

/** True when `value` has the shape of a stored disablement (read back from KV, where anything may be). */
export function isDisablement(value: unknown): value is Disablement {
  if (typeof value !== 'object' || value === null) return false;
  const d = value as Record<string, unknown>;
  return (
    boundedString(d.agent_id, MAX_ID_CHARS) &&
    boundedString(d.by, MAX_FIELD_CHARS) &&
    (d.from === undefined || boundedString(d.from, MAX_FIELD_CHARS)) &&
    typeof d.disabled_at === 'string' &&
    !Number.isNaN(Date.parse(d.disabled_at))
  );
}
