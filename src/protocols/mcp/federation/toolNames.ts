/**
 * Federated tool naming. The AMF name of a tool is `<agent_id>/<tool>`; MCP wire names must match
 * `[A-Za-z0-9_.-]{1,64}`, so on the wire a tool travels as `<prefix>__<tool>` where the prefix is the
 * agent's granted alias or its slug (last segment of the agent id, made unique). Slugs are stable:
 * an agent keeps its slug for the coordinator's lifetime, even across offline/online.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';

/** Separator between the agent prefix and the tool on the wire. */
export const WIRE_SEPARATOR = '__';
const WIRE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const ALIAS = /^[A-Za-z0-9.-]{1,32}$/;

/** True when `name` is a valid MCP tool name (the wire charset and length). */
export function isWireName(name: string): boolean {
  return WIRE_NAME.test(name);
}

/** True when `alias` may be used as an agent prefix (no `_`, so `__` stays a clean separator). */
export function isValidAlias(alias: unknown): alias is string {
  return typeof alias === 'string' && ALIAS.test(alias);
}

/** The base slug of an agent id: its last path segment with characters outside `[A-Za-z0-9.-]` replaced. */
export function baseSlug(agentId: string): string {
  const last = agentId.replace(/\/+$/, '').split('/').pop() ?? '';
  const cleaned = last.replace(/[^A-Za-z0-9.-]/g, '-').slice(0, 24);
  return cleaned === '' ? 'agent' : cleaned;
}

/** Result of resolving the prefixes of every agent. */
export interface PrefixResolution {
  /** agent id → wire prefix (alias when granted, else slug). */
  prefixes: Map<string, string>;
  /** Aliases newly found colliding (each reported once), with the agents involved. */
  newCollisions: Array<{ alias: string; agents: string[] }>;
}

/**
 * Slugs and aliases with first-come-first-served aliases. A collision rejects the alias for every
 * agent that asked for it — the earlier holder too — for as long as this coordinator runs, so a
 * name never silently moves from one agent to another.
 */
export class ToolNamer {
  private readonly slugs = new Map<string, string>();
  private readonly slugOwners = new Map<string, string>();
  /** alias → agent ids that asked for it, in arrival order. */
  private readonly aliasClaims = new Map<string, string[]>();
  private readonly rejected = new Set<string>();

  /** The stable slug of `agentId` (assigned at first sight, unique among slugs). */
  slug(agentId: string): string {
    const known = this.slugs.get(agentId);
    if (known) return known;
    const base = baseSlug(agentId);
    let candidate = base;
    for (let i = 2; this.slugOwners.has(candidate) || this.aliasClaims.has(candidate); i++)
      candidate = `${base}-${i}`;
    this.slugs.set(agentId, candidate);
    this.slugOwners.set(candidate, agentId);
    return candidate;
  }

  /**
   * Resolves the prefix of every agent in `agents` (arrival order matters: first come, first
   * served). An alias equal to another agent's slug also counts as a collision.
   */
  resolve(agents: Array<{ agentId: string; alias?: string | undefined }>): PrefixResolution {
    const newCollisions: PrefixResolution['newCollisions'] = [];
    for (const a of agents) this.slug(a.agentId);
    for (const { agentId, alias } of agents) {
      if (!isValidAlias(alias)) continue;
      const claims = this.aliasClaims.get(alias) ?? [];
      if (!claims.includes(agentId)) {
        claims.push(agentId);
        this.aliasClaims.set(alias, claims);
      }
      const slugOwner = this.slugOwners.get(alias);
      const collides = claims.length > 1 || (slugOwner !== undefined && slugOwner !== agentId);
      if (collides && !this.rejected.has(alias)) {
        this.rejected.add(alias);
        newCollisions.push({
          alias,
          agents: [...claims, ...(slugOwner && !claims.includes(slugOwner) ? [slugOwner] : [])],
        });
      }
    }
    const prefixes = new Map<string, string>();
    for (const { agentId, alias } of agents) {
      const granted = isValidAlias(alias) && !this.rejected.has(alias);
      prefixes.set(agentId, granted ? alias : this.slug(agentId));
    }
    return { prefixes, newCollisions };
  }
}

/** One entry of the federated catalog. */
export interface FederatedTool {
  /** Name on the MCP wire (`<prefix>__<tool>`). */
  wireName: string;
  agentId: string;
  /** The tool's name at the agent. */
  tool: string;
  /** The agent's tool definition, renamed and described for the federation. */
  definition: Tool;
}

/**
 * The catalog of `entries` under their resolved prefixes, keyed by wire name. A tool whose wire name
 * is invalid (too long) or already taken is left out and reported in `skipped`.
 */
export function federatedCatalog(
  entries: ReadonlyArray<{ agentId: string; tools: readonly Tool[] }>,
  prefixes: ReadonlyMap<string, string>,
): {
  catalog: Map<string, FederatedTool>;
  skipped: Array<{ agent: string; tool: string; wire_name: string }>;
} {
  const catalog = new Map<string, FederatedTool>();
  const skipped: Array<{ agent: string; tool: string; wire_name: string }> = [];
  for (const e of entries) {
    const prefix = prefixes.get(e.agentId) ?? baseSlug(e.agentId);
    for (const tool of e.tools) {
      const wireName = `${prefix}${WIRE_SEPARATOR}${tool.name}`;
      if (!isWireName(wireName) || catalog.has(wireName)) {
        skipped.push({ agent: e.agentId, tool: tool.name, wire_name: wireName });
        continue;
      }
      catalog.set(wireName, {
        wireName,
        agentId: e.agentId,
        tool: tool.name,
        definition: {
          ...tool,
          name: wireName,
          description: `[${e.agentId}/${tool.name}] ${tool.description ?? ''}`.trim(),
        },
      });
    }
  }
  return { catalog, skipped };
}
