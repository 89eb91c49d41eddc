/**
 * The coordinator's federated MCP endpoint: an SDK `Server` per session whose `tools/list` is the
 * federation's catalog and whose `tools/call` goes through the federation (policy, audit, forward).
 * Catalog changes reach every open session as `notifications/tools/list_changed`.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { McpEndpoint } from './mcpEndpoint.js';
import type { McpFederation } from './federation.js';

/** Builds the coordinator's `/mcp` endpoint over `federation`. */
export function createCoordinatorMcpEndpoint(federation: McpFederation, version: string): McpEndpoint {
  const endpoint: McpEndpoint = new McpEndpoint({
    createServer: ({ caller }) => {
      const server = new Server(
        { name: 'amf-coordinator', version },
        {
          capabilities: { tools: { listChanged: true } },
          instructions:
            'AMF mesh: the tools of every admitted agent. Wire names are <agent>__<tool>; each description starts with the AMF name [<agent_id>/<tool>].',
        },
      );
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: federation.listTools() }));
      server.setRequestHandler(CallToolRequestSchema, (request, extra) =>
        federation.call(
          request.params.name,
          request.params.arguments ?? {},
          { caller, sessionId: extra.sessionId ?? null },
          extra.signal,
        ),
      );
      return server;
    },
  });
  federation.onToolsChanged(() => void endpoint.broadcast((s) => s.sendToolListChanged()));
  return endpoint;
}
