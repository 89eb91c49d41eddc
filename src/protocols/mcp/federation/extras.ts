/**
 * The federated catalog beyond tools, rebuilt from the live agents' offers after every change:
 * resources and templates (resources.ts) and prompts (prompts.ts). Also grants
 * bare tool names (bareNames.ts).
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { claimAll, type BareCollision, type BareNames } from './bareNames.js';
import { PromptCatalog } from './prompts.js';
import { ResourceCatalog, type FederationEntry } from './resources.js';
import { isWireName, WIRE_SEPARATOR, type FederatedTool } from './toolNames.js';

/** The federated resources and prompts. */
export interface FederatedExtras {
  resources: ResourceCatalog;
  prompts: PromptCatalog;
}

/** Builds the extras of `entries` (arrival order: bare names are first come, first served). */
export function buildFederatedExtras(
  entries: readonly FederationEntry[],
  bare: BareNames | undefined,
  collisions: BareCollision[],
): FederatedExtras {
  return {
    resources: new ResourceCatalog(entries, bare, collisions),
    prompts: new PromptCatalog(entries, bare, collisions),
  };
}

/**
 * With bare names on, adds each granted bare tool name to `catalog` (so it resolves) and lists the
 * tool under it instead of its namespaced name (which still resolves); returns the tool list.
 */
export function grantBareToolNames(
  catalog: Map<string, FederatedTool>,
  bare: BareNames | undefined,
  collisions: BareCollision[],
): Tool[] {
  if (!bare) return [...catalog.values()].map((t) => t.definition);
  const eligible = (name: string) => isWireName(name) && !name.includes(WIRE_SEPARATOR);
  claimAll(
    bare,
    [...catalog.values()]
      .filter((e) => eligible(e.tool))
      .map((e) => ({ kind: 'tool' as const, name: e.tool, agentId: e.agentId })),
    collisions,
  );
  const listed: Tool[] = [];
  for (const entry of [...catalog.values()]) {
    const name = entry.tool;
    const granted = eligible(name) && bare.isGranted('tool', name, entry.agentId) && !catalog.has(name);
    if (!granted) {
      listed.push(entry.definition);
      continue;
    }
    const definition = { ...entry.definition, name };
    catalog.set(name, { ...entry, wireName: name, definition });
    listed.push(definition);
  }
  return listed;
}
