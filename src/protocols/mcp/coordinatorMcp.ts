/**
 * The coordinator's federated MCP endpoint: an SDK `Server` per session whose `tools/list` is the
 * federation's catalog and whose `tools/call` goes through the federation (policy, audit, forward).
 * Catalog changes reach every open session as `notifications/tools/list_changed`. The same catalog
 * and call path serve the stateless revision 2026-07-28 (no session: policy and audit per request,
 * catalog changes over `subscriptions/listen`).
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js';
import { McpEndpoint, type McpSessionLimits } from './mcpEndpoint.js';
import type { McpFederation } from './federation.js';

const INSTRUCTIONS =
  'AMF mesh: the tools of every admitted agent. Wire names are <agent>__<tool>; each description starts with the AMF name [<agent_id>/<tool>].';

/** Builds the coordinator's `/mcp` endpoint over `federation`. */
export function createCoordinatorMcpEndpoint(
  federation: McpFederation,
  version: string,
  limits: McpSessionLimits = {},
): McpEndpoint {
  const endpoint: McpEndpoint = new McpEndpoint({
    ...limits,
    createServer: ({ caller }) => {
      const server = new Server(
        { name: 'amf-coordinator', version },
        {
          capabilities: { tools: { listChanged: true } },
          instructions: INSTRUCTIONS,
        },
      );
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: federation.listTools() }));
      server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
        // A caller that asked for progress gets the agent's progress notifications under its own token.
        const token = request.params._meta?.progressToken;
        const relay =
          token === undefined
            ? undefined
            : (progress: Progress) =>
                void extra
                  .sendNotification({
                    method: 'notifications/progress',
                    params: { ...progress, progressToken: token },
                  })
                  .catch(() => undefined);
        return federation.call(
          request.params.name,
          request.params.arguments ?? {},
          { caller, sessionId: extra.sessionId ?? null },
          extra.signal,
          relay,
        );
      });
      return server;
    },
    tools: {
      info: { name: 'amf-coordinator', version },
      instructions: INSTRUCTIONS,
      listChanged: true,
      list: () => federation.listTools(),
      call: (name, args, { caller, signal }) =>
        federation.call(name, args, { caller, sessionId: null }, signal),
    },
  });
  federation.onToolsChanged(() => {
    void endpoint.broadcast((s) => s.sendToolListChanged());
    endpoint.notifyToolsChanged();
  });
  return endpoint;
}
