/**
 * Bare names (config `mcp.bare_names`): the coordinator's `/mcp` may list a federated tool, prompt
 * or resource under the agent's own name (`test_simple_text`, `test://static-text`) instead of the
 * namespaced one, so a client written against one server works through the federation. The alias
 * rules apply per name: first come, first served, and a second agent claiming the same name
 * rejects it for every claimant for the coordinator's lifetime (they keep their namespaced names,
 * which always resolve), so a bare name never moves from one agent to another.
 */

/** What a bare name names. */
export type BareKind = 'tool' | 'prompt' | 'resource' | 'template';

/** A name newly found claimed by more than one agent. */
export interface BareCollision {
  kind: BareKind;
  name: string;
  agents: string[];
}

/** Most names tracked; past it new names are not granted (they keep their namespaced names). */
const MAX_CLAIMS = 100_000;

export class BareNames {
  /** `kind\0name` → agents that claimed it, in arrival order. */
  private readonly claims = new Map<string, string[]>();
  private readonly rejected = new Set<string>();

  /**
   * Records that `agentId` serves `name`; true when the bare name is (still) granted to it. A new
   * collision is pushed to `collisions` once.
   */
  claim(kind: BareKind, name: string, agentId: string, collisions: BareCollision[]): boolean {
    const key = `${kind}\0${name}`;
    let claimants = this.claims.get(key);
    if (!claimants) {
      if (this.claims.size >= MAX_CLAIMS) return false;
      claimants = [];
      this.claims.set(key, claimants);
    }
    if (!claimants.includes(agentId)) claimants.push(agentId);
    if (claimants.length > 1 && !this.rejected.has(key)) {
      this.rejected.add(key);
      collisions.push({ kind, name, agents: [...claimants] });
    }
    return !this.rejected.has(key);
  }

  /** True when `name` is granted to `agentId` (claimed by it alone, never contested). */
  isGranted(kind: BareKind, name: string, agentId: string): boolean {
    const key = `${kind}\0${name}`;
    return !this.rejected.has(key) && this.claims.get(key)?.[0] === agentId;
  }
}

/**
 * Claims every name of a catalog build first, so a name contested within one build is listed
 * namespaced for all claimants in that very build (not granted to the first one once more).
 */
export function claimAll(
  bare: BareNames | undefined,
  claims: Iterable<{ kind: BareKind; name: string; agentId: string }>,
  collisions: BareCollision[],
): void {
  if (!bare) return;
  for (const c of claims) bare.claim(c.kind, c.name, c.agentId, collisions);
}
