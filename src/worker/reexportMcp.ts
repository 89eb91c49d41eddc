/**
 * Re-exporting a worker's configured MCP servers (`mcp.servers`, the hub handlers use as
 * `ctx.tools`) on the worker's own `/mcp`, so the coordinator federates them with the worker:
 * their allowed tools under the hub's names (`<server>__<tool>`), their prompts as
 * `<server>__<prompt>`, their resources and templates as `amf://<server>/<uri>`. Lists are read
 * once when the worker starts; results are passed through unchanged.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { McpClientHub } from '../mcpClient/mcpClientHub.js';
import type {
  HandlerMcpPrompt,
  HandlerMcpResource,
  HandlerMcpResourceTemplate,
  HandlerMcpSurface,
  HandlerMcpTool,
} from './handlerMcp.js';

/** Most items of one kind re-exported per server. */
const MAX_PER_SERVER = 500;
const SCHEME = 'amf://';

function uriOf(server: string, uri: string): string {
  return `${SCHEME}${server}/${uri}`;
}

/** The server URI behind a re-exported one (undefined when it is not `amf://<server>/...`). */
function serverUri(server: string, uri: string): string | undefined {
  const prefix = `${SCHEME}${server}/`;
  return uri.startsWith(prefix) ? uri.slice(prefix.length) : undefined;
}

async function serverSurface(server: string, client: Client): Promise<HandlerMcpSurface> {
  const caps = client.getServerCapabilities() ?? {};
  const resources: HandlerMcpResource[] = [];
  const resourceTemplates: HandlerMcpResourceTemplate[] = [];
  const prompts: HandlerMcpPrompt[] = [];
  const read = (uri: string) => client.readResource({ uri });
  if (caps.resources) {
    const listed = (await client.listResources()).resources.slice(0, MAX_PER_SERVER);
    for (const r of listed)
      resources.push({
        resource: { ...r, uri: uriOf(server, r.uri) },
        read: async () => {
          const result = await read(r.uri);
          return { ...result, contents: result.contents.map((c) => ({ ...c, uri: uriOf(server, c.uri) })) };
        },
      });
    const templates = (await client.listResourceTemplates()).resourceTemplates.slice(0, MAX_PER_SERVER);
    for (const t of templates)
      resourceTemplates.push({
        template: { ...t, uriTemplate: uriOf(server, t.uriTemplate) },
        read: async (uri) => {
          const own = serverUri(server, uri) ?? uri;
          const result = await read(own);
          return { ...result, contents: result.contents.map((c) => ({ ...c, uri: uriOf(server, c.uri) })) };
        },
      });
  }
  if (caps.prompts) {
    const listed = (await client.listPrompts()).prompts.slice(0, MAX_PER_SERVER);
    for (const p of listed)
      prompts.push({
        prompt: { ...p, name: `${server}__${p.name}` },
        get: (args) => client.getPrompt({ name: p.name, arguments: args }),
      });
  }
  return { resources, resourceTemplates, prompts };
}

/** The surface that re-exports every connected server of `hub` (a server that fails is skipped). */
export async function reexportSurface(
  hub: McpClientHub,
  onError: (server: string, err: unknown) => void = () => undefined,
): Promise<HandlerMcpSurface> {
  const tools: HandlerMcpTool[] = hub.listTools().map((t) => ({
    definition: { name: t.name, description: t.description, inputSchema: t.inputSchema },
    call: async (args, ctx) =>
      (await hub.clientOf(t.server)!.callTool({ name: t.tool, arguments: args }, undefined, {
        signal: ctx.signal,
      })) as CallToolResult,
  }));
  const parts = await Promise.all(
    hub.servers.map((server) =>
      serverSurface(server, hub.clientOf(server)!).catch((err: unknown) => {
        onError(server, err);
        return {};
      }),
    ),
  );
  return mergeSurfaces({ tools }, ...parts);
}

/** One surface of several (lists joined; the first `complete`, `subscriptions` and `logging` win). */
export function mergeSurfaces(...surfaces: Array<HandlerMcpSurface | undefined>): HandlerMcpSurface {
  const all = surfaces.filter((s): s is HandlerMcpSurface => s !== undefined);
  const complete = all.find((s) => s.complete)?.complete;
  const subscriptions = all.find((s) => s.subscriptions)?.subscriptions;
  return {
    tools: all.flatMap((s) => s.tools ?? []),
    resources: all.flatMap((s) => s.resources ?? []),
    resourceTemplates: all.flatMap((s) => s.resourceTemplates ?? []),
    prompts: all.flatMap((s) => s.prompts ?? []),
    ...(complete ? { complete } : {}),
    ...(subscriptions ? { subscriptions } : {}),
    ...(all.some((s) => s.logging) ? { logging: true } : {}),
  };
}
