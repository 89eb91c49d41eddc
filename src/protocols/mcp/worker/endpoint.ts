/**
 * A worker's MCP server: its capability handler served as one MCP tool named after the handler
 * (`echo` for the built-in echo worker). A call runs the same handler as a mesh task, so MCP and
 * mesh callers get the same behaviour. A plain call of that tool on a live session is answered as
 * one JSON body (endpoint/sessionFastPath.ts); everything else goes through the SDK server.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type Progress,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { McpRequestContext, WorkerHandler } from '../../../worker/handlerApi.js';
import type { MeshWorker } from '../../../worker/meshWorker.js';
import {
  COORDINATOR_FINGERPRINT_HEADER,
  type CoordinatorFingerprintRecord,
} from '../coordinatorFingerprint.js';
import { McpEndpoint, remoteAddressKey, type McpSessionLimits } from '../endpoint/endpoint.js';
import { answerCall, asPlainToolCall } from '../endpoint/sessionFastPath.js';
import { SessionLogLevel } from '../logLevel.js';
import { requestContext, ResourceUpdates, serveHandlerSurface, surfaceCapabilities } from './surface.js';
import { WorkerCallers } from '../workerCallers.js';

/** Input schema of a handler that declares none: one string argument `text` (the task text). */
export const DEFAULT_TOOL_INPUT_SCHEMA: Tool['inputSchema'] = {
  type: 'object',
  properties: { text: { type: 'string', description: 'The task text' } },
  required: ['text'],
};

/** The MCP tool a handler is served as. */
export function handlerTool(handler: WorkerHandler): Tool {
  return {
    name: handler.name,
    description: handler.description,
    inputSchema: (handler.inputSchema as Tool['inputSchema'] | undefined) ?? DEFAULT_TOOL_INPUT_SCHEMA,
  };
}

/** Options of a worker's MCP endpoint. */
export interface WorkerMcpOptions {
  handler: WorkerHandler;
  /** The capability tag a tool call runs under (the worker's first tag). */
  tag: string;
  version: string;
  getWorker: () => MeshWorker;
  /** Records the `X-AMF-Coordinator-Fingerprint` of callers. */
  coordinatorFingerprint?: CoordinatorFingerprintRecord;
  /** Bounds of the session table (per client, in total, idle expiry); defaults when absent. */
  sessions?: McpSessionLimits;
}

function errorResult(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/** Builds the `/mcp` endpoint of a worker (session-based revisions and the stateless 2026-07-28). */
export function createWorkerMcpEndpoint(options: WorkerMcpOptions): McpEndpoint {
  const tool = handlerTool(options.handler);
  const surface = options.handler.mcp;
  const extraTools = new Map((surface?.tools ?? []).map((t) => [t.definition.name, t]));
  const allTools = [tool, ...[...extraTools.values()].map((t) => t.definition)];
  const updates = new ResourceUpdates(surface);
  const callTool = async (
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<CallToolResult> => {
    if (name !== tool.name)
      // Unknown tool: a JSON-RPC invalid-params error, as the SDK's McpServer does.
      throw new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`);
    const text =
      typeof args.text === 'string'
        ? args.text
        : options.handler.inputSchema
          ? JSON.stringify(args)
          : undefined;
    if (text === undefined) return errorResult('argument "text" (string) is required');
    const taskId = randomUUID();
    // An MCP tool call is a direct task: same slot, drain and events as every other way in.
    const outcome = await options.getWorker().run(
      {
        taskId,
        traceId: taskId,
        tag: options.tag,
        text,
        messages: [{ role: 'user', content: text }],
        input: args,
        stream: false,
        attempt: 1,
      },
      { origin: 'direct', signal },
    );
    if (!outcome.ok) return errorResult(`${outcome.code}: ${outcome.message}`);
    return {
      content: [{ type: 'text', text: outcome.result.text }],
      ...(outcome.result.data ? { structuredContent: outcome.result.data } : {}),
    };
  };
  const serverInfo = { name: `amf-worker-${options.handler.name}`, version: options.version };
  return new McpEndpoint({
    ...options.sessions,
    clientKey: coordinatorApart,
    // A plain call of the handler's own tool, answered as one JSON body without the SDK transport;
    // every other request (surface tools, progress, tasks) takes the SDK handler below.
    fastRequest: (session, request, signal) => {
      const call = asPlainToolCall(request);
      if (call?.name !== tool.name) return undefined;
      return answerCall(session, request, signal, (callSignal) =>
        callTool(call.name, call.arguments, callSignal),
      );
    },
    ...(options.coordinatorFingerprint
      ? {
          onRequest: (req: IncomingMessage) =>
            options.coordinatorFingerprint!.observe(req.headers[COORDINATOR_FINGERPRINT_HEADER]),
        }
      : {}),
    createServer: () => {
      const server = new Server(serverInfo, {
        capabilities: { tools: {}, ...surfaceCapabilities(surface) },
      });
      const level = new SessionLogLevel();
      const callers = new WorkerCallers(server);
      server.onclose = () => callers.close();
      server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: allTools }));
      server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
        const extraTool = extraTools.get(request.params.name);
        if (extraTool && request.params.name !== tool.name) {
          const meta = request.params._meta;
          const caller = callers.of(extra.sessionId, meta);
          const ctx = requestContext(server, extra, meta?.progressToken, level, caller);
          return extraTool.call(request.params.arguments ?? {}, ctx);
        }
        return callTool(request.params.name, request.params.arguments ?? {}, extra.signal);
      });
      if (surface)
        serveHandlerSurface(server, surface, level, updates, (sessionId, meta) =>
          callers.of(sessionId, meta),
        );
      return server;
    },
    tools: {
      info: serverInfo,
      list: () => allTools,
      call: (name, args, { signal, onProgress }) => {
        const extraTool = extraTools.get(name);
        if (extraTool && name !== tool.name)
          return extraTool.call(args, statelessContext(signal, onProgress));
        return callTool(name, args, signal);
      },
    },
  });
}

/**
 * Whom a session of a worker's `/mcp` counts against: its address, with the coordinator's links
 * (the requests that carry its fingerprint header) kept apart from the other clients on that
 * address. On one machine the coordinator and every local client share 127.0.0.1, and the
 * coordinator's sessions must neither crowd out nor be crowded out by theirs. The header is not a
 * credential (the edge gate checks those): a client that sends it only moves its sessions into the
 * coordinator's share, where every session in use is as safe as anywhere else.
 */
function coordinatorApart(req: IncomingMessage): string {
  const address = remoteAddressKey(req);
  return req.headers[COORDINATOR_FINGERPRINT_HEADER] === undefined ? address : `${address} (coordinator)`;
}

/**
 * The context of a surface tool called over the stateless leg: progress on the request's stream;
 * no session, so no log level and no requests to the client.
 */
function statelessContext(signal: AbortSignal, onProgress?: (progress: Progress) => void): McpRequestContext {
  const unsupported = () =>
    Promise.reject(new McpError(ErrorCode.InvalidRequest, 'not available on the stateless MCP revision'));
  return {
    signal,
    progress: (progress, total, message) => {
      onProgress?.({
        progress,
        ...(total === undefined ? {} : { total }),
        ...(message === undefined ? {} : { message }),
      });
      return Promise.resolve();
    },
    log: () => Promise.resolve(),
    sample: unsupported,
    elicit: unsupported,
  };
}
