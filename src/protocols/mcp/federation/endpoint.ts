/**
 * The coordinator's federated MCP endpoint: an SDK `Server` per session whose `tools/list` is the
 * federation's catalog and whose `tools/call` goes through the federation (policy, audit, forward).
 * Resources, prompts, completions and logging are served per session by session.ts
 * (announced from the start, whether or not an agent offers them yet). Catalog changes reach every open session as
 * `notifications/{tools,resources,prompts}/list_changed`. The same tool catalog and call path serve
 * the stateless revision 2026-07-28 (no session: policy and audit per request, catalog changes over
 * `subscriptions/listen`, progress relayed on the request's stream).
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  McpError,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js';
import { McpEndpoint, STOPPING_ERROR, type McpSessionLimits } from '../endpoint/endpoint.js';
import type { McpFederation } from './federation.js';
import { CoordinatorMcpSession, federatedCapabilities } from './session.js';
import { plainToolCall } from './plainToolCall.js';

const INSTRUCTIONS =
  'AMF mesh: the tools of every admitted agent. Wire names are <agent>__<tool>; each description starts with the AMF name [<agent_id>/<tool>].';

/** Builds the coordinator's `/mcp` endpoint over `federation`. */
export function createCoordinatorMcpEndpoint(
  federation: McpFederation,
  version: string,
  limits: McpSessionLimits = {},
): McpEndpoint {
  // The session state of each SDK server, for the fast path of its plain tool calls.
  const sessions = new WeakMap<Server, CoordinatorMcpSession>();
  const endpoint: McpEndpoint = new McpEndpoint({
    ...limits,
    fastRequest: (fast, request, signal) => {
      const session = sessions.get(fast.server as Server);
      if (!session?.takesPlainCalls()) return undefined;
      return plainToolCall(federation, fast, request, session.caller(fast.sessionId), signal);
    },
    createServer: ({ caller }) => {
      const capabilities = { tools: { listChanged: true }, ...federatedCapabilities() };
      const server = new Server(
        { name: 'amf-coordinator', version },
        { capabilities, instructions: INSTRUCTIONS },
      );
      const session = new CoordinatorMcpSession(server, federation, caller, capabilities);
      session.install();
      sessions.set(server, session);
      server.onclose = () => session.close();
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: federation.listTools() }));
      server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
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
        const agentId = federation.catalog().get(request.params.name)?.agentId;
        const done = agentId === undefined ? undefined : session.track(agentId, extra);
        // The endpoint stopping ends the call too, with an error answer (not a stream cut).
        const stopping = endpoint.stopping;
        const call = new AbortController();
        const abort = () => call.abort();
        if (extra.signal.aborted) abort();
        else extra.signal.addEventListener('abort', abort, { once: true });
        const unlisten = endpoint.whenStopping(abort);
        try {
          const result = await federation.call(
            request.params.name,
            request.params.arguments ?? {},
            session.caller(extra.sessionId ?? null),
            call.signal,
            relay,
            session.clientSupplier(),
          );
          // The forward cut short by the stop fails as a tool error: the caller is told why instead.
          if (result.isError === true && stopping.aborted && !extra.signal.aborted)
            throw new McpError(STOPPING_ERROR.code, STOPPING_ERROR.message, STOPPING_ERROR.data);
          return result;
        } catch (err) {
          if (stopping.aborted && !extra.signal.aborted)
            throw new McpError(STOPPING_ERROR.code, STOPPING_ERROR.message, STOPPING_ERROR.data);
          throw err;
        } finally {
          unlisten();
          extra.signal.removeEventListener('abort', abort);
          done?.();
        }
      });
      return server;
    },
    tools: {
      info: { name: 'amf-coordinator', version },
      instructions: INSTRUCTIONS,
      listChanged: true,
      list: () => federation.listTools(),
      call: (name, args, { caller, signal, onProgress }) =>
        federation.call(name, args, { caller, sessionId: null }, signal, onProgress),
    },
  });
  federation.onToolsChanged(() => {
    void endpoint.broadcast((s) => s.sendToolListChanged());
    endpoint.notifyToolsChanged();
  });
  federation.onExtrasChanged((kind) => {
    void endpoint.broadcast((s) =>
      kind === 'resources' ? s.sendResourceListChanged() : s.sendPromptListChanged(),
    );
  });
  return endpoint;
}
