/**
 * `GET /api/amp/discover?q=&capability=&limit=` over the registry (the hub's parameters and bounds:
 * q ≤ 200 characters, capability ≤ 100, limit 1..50, default 10). Every listed agent is reached
 * through this coordinator's `/api/amp/message` (mesh dispatch is by capability).
 */
import type { RegisteredAgent } from '../../registry/agentRegistry.js';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import { AMP_VERSION } from './ampMessage.js';
import { intentWords } from '../../registry/intentRouter.js';
import { agentDeclaresReadOnly } from './trustLevels.js';

/** Parsed discover query, or the problem with it. */
export type DiscoverQuery =
  { ok: true; q: string | null; capability: string | null; limit: number } | { ok: false; message: string };

/** Validates the query parameters of a discover request. */
export function parseDiscoverQuery(params: URLSearchParams): DiscoverQuery {
  const q = params.get('q');
  const capability = params.get('capability');
  const limitText = params.get('limit');
  if (q !== null && q.length > 200) return { ok: false, message: 'q must be at most 200 characters' };
  if (capability !== null && capability.length > 100)
    return { ok: false, message: 'capability must be at most 100 characters' };
  let limit = 10;
  if (limitText !== null && limitText !== '') {
    limit = Number(limitText);
    if (!Number.isInteger(limit) || limit < 1 || limit > 50)
      return { ok: false, message: 'limit must be a whole number from 1 to 50' };
  }
  return { ok: true, q: q?.trim() || null, capability: capability?.trim().toLowerCase() || null, limit };
}

function describe(agent: RegisteredAgent): string {
  const d = agent.card?.description;
  return typeof d === 'string' ? d.slice(0, 500) : '';
}

function searchText(agent: RegisteredAgent): string {
  const skills = Array.isArray(agent.card?.skills) ? (agent.card.skills as unknown[]).slice(0, 64) : [];
  const skillText = skills
    .map((s) => (typeof s === 'object' && s !== null ? JSON.stringify(s).slice(0, 2000) : ''))
    .join(' ');
  return [
    agent.record.agent_id,
    agent.record.display_name ?? '',
    (agent.record.capability_tags ?? []).join(' '),
    describe(agent),
    skillText,
  ]
    .join(' ')
    .toLowerCase();
}

/** The discover answer: live agents matching the query, best matches first. */
export function discoverAgents(
  registry: AgentDirectory,
  query: { q: string | null; capability: string | null; limit: number },
  messageEndpoint: string,
): Record<string, unknown> {
  const words = query.q ? intentWords(query.q) : [];
  const ranked: Array<{ agent: RegisteredAgent; score: number }> = [];
  for (const agent of registry.list()) {
    if (agent.status !== 'live' || registry.isDisabled(agent.record.agent_id)) continue;
    const tags = agent.record.capability_tags ?? [];
    let score = 1;
    if (query.capability) {
      if (tags.includes(query.capability)) score += 10;
      else if (tags.some((t) => t.includes(query.capability!))) score += 5;
      else continue;
    }
    if (words.length > 0) {
      const text = searchText(agent);
      const hits = words.filter((w) => text.includes(w)).length;
      if (hits === 0) continue;
      score += hits;
    }
    ranked.push({ agent, score });
  }
  ranked.sort((a, b) => b.score - a.score || a.agent.record.agent_id.localeCompare(b.agent.record.agent_id));
  const agents = ranked.slice(0, query.limit).map(({ agent }) => {
    const tags = agent.record.capability_tags ?? [];
    return {
      id: agent.record.agent_id,
      name: agent.record.display_name ?? agent.record.agent_id.split('/').pop(),
      description: describe(agent),
      capabilities: tags,
      read_only_capabilities: tags.filter((t) => agentDeclaresReadOnly(agent, t)),
      status: agent.record.status ?? 'active',
      endpoint: agent.record.endpoint,
      ...(agent.record.card_url ? { card_url: agent.record.card_url } : {}),
      amp_endpoint: messageEndpoint,
      admitted_at: agent.admittedAt,
    };
  });
  return {
    amp: AMP_VERSION,
    agents,
    count: agents.length,
    query: query.q ?? query.capability,
    timestamp: new Date().toISOString(),
  };
}
