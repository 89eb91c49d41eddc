/**
 * The federated resource catalog: every live agent's resources and resource templates under
 * namespaced URIs `amf://<prefix>/<the agent's URI>` (prefix as for tools: granted alias, else
 * slug), or under the agent's own URI when bare names are on and the URI is granted (bareNames.ts).
 * A namespaced URI always resolves, listed or not, so a template instantiated by the client
 * (`amf://conformance/test://template/123/data`) reaches its agent too.
 */
import type { Resource, ResourceTemplate } from '@modelcontextprotocol/sdk/types.js';
import type { AgentCatalog } from './agentCatalog.js';
import { claimAll, type BareCollision, type BareNames } from './bareNames.js';
import { matchUriTemplate } from '../uriTemplate.js';

/** Scheme of namespaced resource URIs. */
export const FEDERATED_URI_SCHEME = 'amf://';

/** One agent's offer with its resolved wire prefix, in arrival order. */
export interface FederationEntry {
  agentId: string;
  prefix: string;
  catalog: AgentCatalog;
}

/** Where a federated URI leads. */
export interface ResourceTarget {
  agentId: string;
  /** The URI at the agent. */
  uri: string;
}

/** `amf://<prefix>/<uri>`. */
export function namespacedUri(prefix: string, uri: string): string {
  return `${FEDERATED_URI_SCHEME}${prefix}/${uri}`;
}

/** The prefix and agent URI of a namespaced URI, or undefined. */
export function parseNamespacedUri(uri: string): { prefix: string; uri: string } | undefined {
  if (!uri.startsWith(FEDERATED_URI_SCHEME)) return undefined;
  const rest = uri.slice(FEDERATED_URI_SCHEME.length);
  const slash = rest.indexOf('/');
  if (slash <= 0 || slash === rest.length - 1) return undefined;
  return { prefix: rest.slice(0, slash), uri: rest.slice(slash + 1) };
}

function described(agentId: string, description: string | undefined): string {
  return `[${agentId}] ${description ?? ''}`.trim();
}

/** The resources and templates of the federation. */
export class ResourceCatalog {
  private readonly listed: Resource[] = [];
  private readonly listedTemplates: ResourceTemplate[] = [];
  private readonly bareUris = new Map<string, ResourceTarget>();
  private readonly bareTemplates: Array<{ agentId: string; template: string }> = [];
  private readonly agentByPrefix = new Map<string, string>();
  /** Federated template string → the agent and its own template (for completion references). */
  private readonly templateTargets = new Map<string, { agentId: string; template: string }>();

  constructor(entries: readonly FederationEntry[], bare: BareNames | undefined, collisions: BareCollision[]) {
    claimAll(
      bare,
      entries.flatMap((e) => [
        ...e.catalog.resources.map((r) => ({ kind: 'resource' as const, name: r.uri, agentId: e.agentId })),
        ...e.catalog.templates.map((t) => ({
          kind: 'template' as const,
          name: t.uriTemplate,
          agentId: e.agentId,
        })),
      ]),
      collisions,
    );
    for (const { agentId, prefix, catalog } of entries) {
      this.agentByPrefix.set(prefix, agentId);
      for (const r of catalog.resources) {
        const isBare = bare?.isGranted('resource', r.uri, agentId) === true;
        const uri = isBare ? r.uri : namespacedUri(prefix, r.uri);
        if (isBare) this.bareUris.set(r.uri, { agentId, uri: r.uri });
        this.listed.push({ ...r, uri, description: described(agentId, r.description) });
      }
      for (const t of catalog.templates) {
        const isBare = bare?.isGranted('template', t.uriTemplate, agentId) === true;
        const uriTemplate = isBare ? t.uriTemplate : namespacedUri(prefix, t.uriTemplate);
        if (isBare) this.bareTemplates.push({ agentId, template: t.uriTemplate });
        this.templateTargets.set(uriTemplate, { agentId, template: t.uriTemplate });
        this.listedTemplates.push({ ...t, uriTemplate, description: described(agentId, t.description) });
      }
    }
  }

  list(): Resource[] {
    return this.listed;
  }

  templates(): ResourceTemplate[] {
    return this.listedTemplates;
  }

  /** The agent and agent URI behind a federated URI, or undefined when none serves it. */
  resolve(uri: string): ResourceTarget | undefined {
    const namespaced = parseNamespacedUri(uri);
    if (namespaced) {
      const agentId = this.agentByPrefix.get(namespaced.prefix);
      if (agentId) return { agentId, uri: namespaced.uri };
    }
    const direct = this.bareUris.get(uri);
    if (direct) return direct;
    const viaTemplate = this.bareTemplates.find((t) => matchUriTemplate(t.template, uri) !== undefined);
    return viaTemplate ? { agentId: viaTemplate.agentId, uri } : undefined;
  }

  /** The agent and its own template behind a listed template (completion `ref/resource`). */
  resolveTemplate(uriTemplate: string): { agentId: string; template: string } | undefined {
    return this.templateTargets.get(uriTemplate);
  }

  /** Whether any agent offers resources or templates. */
  get offered(): boolean {
    return this.listed.length + this.listedTemplates.length > 0;
  }
}
