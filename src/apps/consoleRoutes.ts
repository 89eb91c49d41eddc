/**
 * The coordinator endpoints the console needs beyond the DESIGN.md contract (listed in
 * docs/console.md): event history replayed from JetStream, the task list, admission decisions, the federated tool
 * catalog, one agent in full, and forgetting an offline agent. All sit behind the API key like every
 * other non-public route (the coordinator's edge checks it before routing), and every query is bounded.
 */
import { AmfError } from '../errors.js';
import type { Coordinator } from '../coordinator/coordinator.js';
import { EVENTS_STREAM, kvKey } from '../fabric/jetstream.js';
import { parseHistoryQuery, readHistory } from '../http/eventHistory.js';
import { decodePathSegment, sendJson, type Router } from '../http/httpKit.js';
import type { McpFederation } from '../protocols/mcp/federation.js';
import type { RegisteredAgent } from '../registry/agentRegistry.js';
import { ADMISSIONS_MAX_LIMIT, recentAdmissions } from './admissionLog.js';
import { taskSnapshot } from '../coordinator/sharedState.js';
import { listTasks, parseTaskListQuery } from './taskList.js';

const AGENT_PREFIX = '/agents/';
const MAX_AGENT_ID_CHARS = 512;

function boundedInt(raw: string | null, fallback: number, max: number, name: string): number {
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new AmfError('INVALID_REQUEST', `${name} must be an integer from 1 to ${max}`);
  return n;
}

function agentIdFrom(url: URL): string {
  const id = decodePathSegment(url.pathname.slice(AGENT_PREFIX.length));
  if (id.length === 0 || id.length > MAX_AGENT_ID_CHARS)
    throw new AmfError('INVALID_REQUEST', `agent id must be 1 to ${MAX_AGENT_ID_CHARS} characters`);
  return id;
}

/** One agent as the console shows it: the advertisement, its state, its card and its tools. */
function agentDetail(agent: RegisteredAgent, federation: McpFederation): Record<string, unknown> {
  const id = agent.record.agent_id;
  const tools = [...federation.catalog().values()]
    .filter((t) => t.agentId === id)
    .map((t) => ({ wire_name: t.wireName, tool: t.tool, description: t.definition.description ?? '' }));
  return {
    ...agent.record,
    capability_tags: agent.record.capability_tags ?? [],
    status: agent.status,
    ...(agent.unverified ? { unverified: agent.unverified } : {}),
    admitted_at: agent.admittedAt,
    last_seen: new Date(agent.lastSeen).toISOString(),
    heartbeat_seconds: agent.heartbeatSeconds,
    card: agent.card ?? null,
    tools,
  };
}

/** Registers the console endpoints on the coordinator's router. */
export function registerConsoleRoutes(
  router: Router,
  coordinator: Coordinator,
  federation: McpFederation,
): void {
  const jsm = coordinator.stores.jsm;
  router.on('GET', '/events/history', async (_req, res, url) => {
    sendJson(res, 200, await readHistory(jsm, EVENTS_STREAM, parseHistoryQuery(url)));
  });
  router.on('GET', '/tasks', async (_req, res, url) => {
    const query = parseTaskListQuery(url);
    const fresher = (id: string) => {
      const task = coordinator.lifecycle.get(id);
      return task ? taskSnapshot(task) : undefined;
    };
    sendJson(res, 200, await listTasks(jsm, query, fresher));
  });
  router.on('GET', '/admissions', async (_req, res, url) => {
    const limit = boundedInt(url.searchParams.get('limit'), 100, ADMISSIONS_MAX_LIMIT, 'limit');
    sendJson(res, 200, { decisions: await recentAdmissions(jsm, coordinator.registry, limit) });
  });
  router.on('GET', '/tools', (_req, res) => {
    const tools = [...federation.catalog().values()].map((t) => ({
      wire_name: t.wireName,
      agent_id: t.agentId,
      tool: t.tool,
      description: t.definition.description ?? '',
      input_schema: t.definition.inputSchema,
    }));
    sendJson(res, 200, { tools });
  });
  router.onPrefix('GET', AGENT_PREFIX, (_req, res, url) => {
    const id = agentIdFrom(url);
    const agent = coordinator.registry.get(id);
    if (!agent) throw new AmfError('NOT_FOUND', `no agent ${id} is known to this coordinator`);
    sendJson(res, 200, agentDetail(agent, federation));
  });
  // Forgetting removes an offline agent from the registry and the shared store and unbinds its id
  // from its key (the key rotation path); a live one would be back at its next heartbeat, so it is
  // refused with the reason.
  router.onPrefix('DELETE', AGENT_PREFIX, async (_req, res, url) => {
    const id = agentIdFrom(url);
    const agent = coordinator.registry.get(id);
    // An id no longer listed may still be bound to its key (removed after a denied re-advertisement).
    if (!agent && coordinator.registry.boundKey(id) === undefined)
      throw new AmfError('NOT_FOUND', `no agent ${id} is known to this coordinator`);
    if (agent && agent.status !== 'offline')
      throw new AmfError(
        'INVALID_REQUEST',
        `agent ${id} is ${agent.status}: only an offline agent can be forgotten (stop it first)`,
      );
    coordinator.registry.forget(id);
    await coordinator.stores.agents.delete(kvKey(id));
    coordinator.log('info', 'agent forgotten by the operator', { agent_id: id });
    sendJson(res, 200, { forgotten: id });
  });
}
