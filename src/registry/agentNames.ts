/**
 * Short agent names, as people type them: `summarizer` for `spiffe://local/worker/summarizer`. The
 * console shows the last segment of an agent id; the CLI and the `/agents/<id>` routes take it back
 * through {@link resolveAgentName}, so one rule decides what a name means everywhere (kubectl's short
 * names). A full id is always taken as it is.
 */
import { AmfError } from '../errors.js';
import type { AgentRegistry } from './agentRegistry.js';

/** The part of an agent id a person reads: its last path segment (the whole id when it has none). */
export function shortAgentName(agentId: string): string {
  const cut = agentId.slice(agentId.lastIndexOf('/') + 1);
  return cut.length > 0 ? cut : agentId;
}

/** What a name given by a person stands for. */
export type AgentNameResolution =
  | { kind: 'id'; agentId: string }
  | { kind: 'unknown'; name: string }
  | { kind: 'ambiguous'; name: string; candidates: string[] };

/** The registry as the resolver reads it. */
export type AgentNameSource = Pick<AgentRegistry, 'get' | 'list' | 'boundKey'>;

/**
 * Resolves `name` against the agents `registry` lists: a known id (listed, or still bound to a key)
 * as it is; else the agents whose short name (last id segment) or advertised `display_name` is
 * `name`; one match is its id, several are ambiguous (candidates sorted). An unknown name is
 * `unknown`; the caller's own "no such agent" answer applies.
 */
export function resolveAgentName(registry: AgentNameSource, name: string): AgentNameResolution {
  if (registry.get(name) !== undefined || registry.boundKey(name) !== undefined)
    return { kind: 'id', agentId: name };
  const matches = new Set<string>();
  for (const agent of registry.list()) {
    const id = agent.record.agent_id;
    if (shortAgentName(id) === name || agent.record.display_name === name) matches.add(id);
  }
  const [only, ...others] = [...matches].sort();
  if (only === undefined) return { kind: 'unknown', name };
  if (others.length === 0) return { kind: 'id', agentId: only };
  return { kind: 'ambiguous', name, candidates: [only, ...others] };
}

/** Candidates named in an ambiguity message at most (the error's `candidates` holds them all). */
const NAMED_CANDIDATES = 10;

/**
 * The agent id `name` stands for, for a route that acts on one agent: `name` itself when it is
 * unknown (the route answers NOT_FOUND in its own words), INVALID_REQUEST listing the candidates
 * when several agents have that short name.
 */
export function agentIdForName(registry: AgentNameSource, name: string): string {
  const resolved = resolveAgentName(registry, name);
  if (resolved.kind === 'id') return resolved.agentId;
  if (resolved.kind === 'unknown') return name;
  const shown = resolved.candidates.slice(0, NAMED_CANDIDATES).join(', ');
  const more =
    resolved.candidates.length > NAMED_CANDIDATES
      ? ` and ${resolved.candidates.length - NAMED_CANDIDATES} more`
      : '';
  throw new AmfError(
    'INVALID_REQUEST',
    `"${name}" names ${resolved.candidates.length} agents (${shown}${more}): give the full agent id`,
    { candidates: resolved.candidates },
  );
}
