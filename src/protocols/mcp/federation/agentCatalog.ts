/**
 * What one agent's MCP server offers, as the federation lists it: tools always, and resources,
 * resource templates and prompts when the agent announces those capabilities. Each list is paged
 * through and bounded (an agent cannot make the coordinator hold an unbounded catalog).
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type {
  Prompt,
  Resource,
  ResourceTemplate,
  ServerCapabilities,
  Tool,
} from '@modelcontextprotocol/sdk/types.js';

/** Most items of one kind listed per agent. */
export const MAX_ITEMS_PER_KIND = 1000;

/** One agent's offer. */
export interface AgentCatalog {
  capabilities: ServerCapabilities;
  tools: Tool[];
  resources: Resource[];
  templates: ResourceTemplate[];
  prompts: Prompt[];
}

/** An agent that offers nothing yet (before its first listing). */
export const EMPTY_CATALOG: AgentCatalog = Object.freeze({
  capabilities: {},
  tools: [],
  resources: [],
  templates: [],
  prompts: [],
}) as AgentCatalog;

async function pages<T>(
  list: (cursor?: string) => Promise<{ items: T[]; nextCursor?: string }>,
): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | undefined;
  do {
    const page = await list(cursor);
    out.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor && out.length < MAX_ITEMS_PER_KIND);
  return out.slice(0, MAX_ITEMS_PER_KIND);
}

const params = (cursor?: string) => (cursor ? { cursor } : undefined);

/** Lists everything `client`'s server offers. */
export async function listAgentCatalog(client: Client): Promise<AgentCatalog> {
  const capabilities = client.getServerCapabilities() ?? {};
  const [tools, resources, templates, prompts] = await Promise.all([
    capabilities.tools
      ? pages(async (c) => {
          const r = await client.listTools(params(c));
          return { items: r.tools, ...(r.nextCursor ? { nextCursor: r.nextCursor } : {}) };
        })
      : [],
    capabilities.resources
      ? pages(async (c) => {
          const r = await client.listResources(params(c));
          return { items: r.resources, ...(r.nextCursor ? { nextCursor: r.nextCursor } : {}) };
        })
      : [],
    capabilities.resources
      ? pages(async (c) => {
          const r = await client.listResourceTemplates(params(c));
          return { items: r.resourceTemplates, ...(r.nextCursor ? { nextCursor: r.nextCursor } : {}) };
        })
      : [],
    capabilities.prompts
      ? pages(async (c) => {
          const r = await client.listPrompts(params(c));
          return { items: r.prompts, ...(r.nextCursor ? { nextCursor: r.nextCursor } : {}) };
        })
      : [],
  ]);
  return { capabilities, tools, resources, templates, prompts };
}
