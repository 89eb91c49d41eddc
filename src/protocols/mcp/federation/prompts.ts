/**
 * The federated prompt catalog: every live agent's prompts under the wire names tools use
 * (`<prefix>__<prompt>`), or under the agent's own name when bare names are on and it is granted
 * (bareNames.ts). A namespaced name always resolves, listed or not.
 */
import type { Prompt } from '@modelcontextprotocol/sdk/types.js';
import { claimAll, type BareCollision, type BareNames } from './bareNames.js';
import type { FederationEntry } from './resources.js';
import { WIRE_SEPARATOR } from './toolNames.js';

/** Where a federated prompt name leads. */
export interface PromptTarget {
  agentId: string;
  /** The prompt's name at the agent. */
  name: string;
}

/** Longest prompt name accepted (MCP sets none; the federation bounds what it keeps). */
const MAX_PROMPT_NAME = 256;

export class PromptCatalog {
  private readonly listed: Prompt[] = [];
  private readonly targets = new Map<string, PromptTarget>();

  constructor(entries: readonly FederationEntry[], bare: BareNames | undefined, collisions: BareCollision[]) {
    claimAll(
      bare,
      entries.flatMap((e) =>
        e.catalog.prompts.map((p) => ({ kind: 'prompt' as const, name: p.name, agentId: e.agentId })),
      ),
      collisions,
    );
    for (const { agentId, prefix, catalog } of entries) {
      for (const p of catalog.prompts) {
        if (p.name.length > MAX_PROMPT_NAME) continue;
        const namespaced = `${prefix}${WIRE_SEPARATOR}${p.name}`;
        const target = { agentId, name: p.name };
        if (!this.targets.has(namespaced)) this.targets.set(namespaced, target);
        const isBare = bare?.isGranted('prompt', p.name, agentId) === true && !this.targets.has(p.name);
        if (isBare) this.targets.set(p.name, target);
        this.listed.push({
          ...p,
          name: isBare ? p.name : namespaced,
          description: `[${agentId}/${p.name}] ${p.description ?? ''}`.trim(),
        });
      }
    }
  }

  list(): Prompt[] {
    return this.listed;
  }

  resolve(name: string): PromptTarget | undefined {
    return this.targets.get(name);
  }
}
