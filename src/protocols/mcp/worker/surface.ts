/**
 * Serves a handler's MCP surface (`WorkerHandler.mcp`: extra tools, resources, templates, prompts,
 * completions, logging, subscriptions) on the SDK server of one worker session, and the re-exported
 * MCP servers in it (worker/reexportMcp.ts: the caller's subscriptions, log level and completions
 * forwarded to them). Capabilities are announced only for what the handler offers.
 */
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CompleteRequestSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type ClientNotification,
  type ClientRequest,
  type ReadResourceResult,
  type ServerCapabilities,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { HandlerMcpSurface, McpRequestContext } from '../../../worker/handlerMcp.js';
import type { CallerContext, McpCallerSession, ReexportedSurface } from '../../../worker/reexportMcp.js';
import { SessionLogLevel } from '../logLevel.js';
import { matchUriTemplate } from '../uriTemplate.js';

type Extra = RequestHandlerExtra<ServerRequest | ClientRequest, ServerNotification | ClientNotification>;

/** Most completion values returned (the spec's cap). */
const MAX_COMPLETIONS = 100;

/** The capabilities a surface adds to the worker's `tools`. */
export function surfaceCapabilities(surface: ReexportedSurface | undefined): ServerCapabilities {
  if (!surface) return {};
  const resources = (surface.resources?.length ?? 0) + (surface.resourceTemplates?.length ?? 0) > 0;
  const reexported = surface.reexported ?? [];
  const subscribe = surface.subscriptions !== undefined || reexported.some((h) => h.subscribe);
  const completions = surface.complete !== undefined || reexported.some((h) => h.completions);
  return {
    ...(resources ? { resources: subscribe ? { subscribe: true } : {} } : {}),
    ...(surface.prompts?.length ? { prompts: {} } : {}),
    ...(completions ? { completions: {} } : {}),
    ...(surface.logging ? { logging: {} } : {}),
  };
}

/**
 * The context a served item runs with, bound to one request of one session; `caller` is who is
 * behind the request (what a re-exported server needs).
 */
export function requestContext(
  server: Server,
  extra: Extra,
  progressToken: string | number | undefined,
  level: SessionLogLevel,
  caller?: McpCallerSession,
): CallerContext {
  const related = { relatedRequestId: extra.requestId, signal: extra.signal };
  const close = extra.closeSSEStream;
  return {
    ...(caller ? { caller } : {}),
    ...(close ? { closeStream: () => close() } : {}),
    signal: extra.signal,
    progress: async (progress, total, message) => {
      if (progressToken === undefined) return;
      await extra.sendNotification({
        method: 'notifications/progress',
        params: {
          progressToken,
          progress,
          ...(total === undefined ? {} : { total }),
          ...(message === undefined ? {} : { message }),
        },
      });
    },
    log: async (lvl, data, logger) => {
      if (!level.admits(lvl)) return;
      // On the request's own stream, so the caller sees it before the result.
      await extra.sendNotification({
        method: 'notifications/message',
        params: { level: lvl, data, ...(logger ? { logger } : {}) },
      });
    },
    sample: (params) => {
      if (!server.getClientCapabilities()?.sampling)
        return Promise.reject(missingCapability('sampling', 'sampling/createMessage'));
      return server.createMessage(params, related);
    },
    elicit: (params) => {
      if (!server.getClientCapabilities()?.elicitation)
        return Promise.reject(missingCapability('elicitation', 'elicitation/create'));
      return server.elicitInput(params as Parameters<Server['elicitInput']>[0], related);
    },
  };
}

/**
 * What a request the client cannot answer fails with, at once: the client declared at `initialize`
 * what it offers, and asking it anyway would only wait for its answer (-32601) or, through a peer
 * that does not relay what it did not declare, for a time limit. -32601 is what a client that
 * lacks the method answers itself.
 */
function missingCapability(capability: string, method: string): McpError {
  return new McpError(
    ErrorCode.MethodNotFound,
    `this tool needs the client's ${capability} capability (${method}), which the client did not declare at initialize`,
    { capability, method },
  );
}

/** Fans the handler's resource-update notices out to the sessions that are open (one per endpoint). */
export class ResourceUpdates {
  private readonly listeners = new Set<(uri: string) => void>();

  constructor(surface: HandlerMcpSurface | undefined) {
    surface?.subscriptions?.onUpdate((uri) => {
      for (const l of this.listeners) l(uri);
    });
  }

  /** Calls `listener` on every update until the returned function is called. */
  listen(listener: (uri: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/** Reads `uri` from the surface's resources or templates; unknown URIs are JSON-RPC errors. */
async function readResource(
  surface: HandlerMcpSurface,
  uri: string,
  ctx: McpRequestContext,
): Promise<ReadResourceResult> {
  const direct = surface.resources?.find((r) => r.resource.uri === uri);
  if (direct) return direct.read(ctx);
  for (const t of surface.resourceTemplates ?? []) {
    const vars = matchUriTemplate(t.template.uriTemplate, uri);
    if (vars) return t.read(uri, vars, ctx);
  }
  // -32002: MCP's "resource not found".
  throw new McpError(-32002, `Resource ${uri} not found`, { uri });
}

/** Who is behind a request of a session: its id and the request's `_meta`. */
export type CallerOf = (
  sessionId: string | undefined,
  meta: Record<string, unknown> | undefined,
) => McpCallerSession | undefined;

/**
 * Registers the surface's request handlers on `server` (the tools handlers stay with the caller,
 * which merges the handler tool with `surface.tools`). `level` holds the session's log level.
 */
export function serveHandlerSurface(
  server: Server,
  surface: ReexportedSurface,
  level: SessionLogLevel,
  updates: ResourceUpdates,
  callerOf: CallerOf = () => undefined,
): void {
  const caps = surfaceCapabilities(surface);
  const reexported = surface.reexported ?? [];
  const ctxOf = (extra: Extra, meta: Record<string, unknown> | undefined, token?: string | number) =>
    requestContext(server, extra, token, level, callerOf(extra.sessionId, meta));
  if (caps.logging)
    server.setRequestHandler(SetLevelRequestSchema, async (request, extra) => {
      level.level = request.params.level;
      const ctx = ctxOf(extra, request.params._meta);
      // Best effort: a re-exported server that refuses keeps its own level, the caller its answer.
      await Promise.allSettled(reexported.map((h) => h.onSetLevel(request.params.level, ctx)));
      return {};
    });
  if (caps.resources) {
    server.setRequestHandler(ListResourcesRequestSchema, () => ({
      resources: (surface.resources ?? []).map((r) => r.resource),
    }));
    server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
      resourceTemplates: (surface.resourceTemplates ?? []).map((t) => t.template),
    }));
    server.setRequestHandler(ReadResourceRequestSchema, (request, extra) =>
      readResource(
        surface,
        request.params.uri,
        ctxOf(extra, request.params._meta, request.params._meta?.progressToken),
      ),
    );
  }
  if (caps.resources?.subscribe) {
    const watched = new Set<string>();
    server.setRequestHandler(SubscribeRequestSchema, async (request, extra) => {
      const ctx = ctxOf(extra, request.params._meta);
      for (const h of reexported) if (await h.onSubscribe(request.params.uri, ctx)) return {};
      if (watched.size >= 1000) throw new McpError(ErrorCode.InvalidRequest, 'too many subscriptions');
      watched.add(request.params.uri);
      return {};
    });
    server.setRequestHandler(UnsubscribeRequestSchema, async (request, extra) => {
      watched.delete(request.params.uri);
      const ctx = ctxOf(extra, request.params._meta);
      await Promise.all(reexported.map((h) => h.onUnsubscribe(request.params.uri, ctx)));
      return {};
    });
    const stop = updates.listen((uri) => {
      if (watched.has(uri)) void server.sendResourceUpdated({ uri }).catch(() => undefined);
    });
    const previous = server.onclose;
    server.onclose = () => {
      stop();
      previous?.();
    };
  }
  if (caps.prompts) {
    server.setRequestHandler(ListPromptsRequestSchema, () => ({
      prompts: (surface.prompts ?? []).map((p) => p.prompt),
    }));
    server.setRequestHandler(GetPromptRequestSchema, (request, extra) => {
      const prompt = surface.prompts?.find((p) => p.prompt.name === request.params.name);
      if (!prompt) throw new McpError(ErrorCode.InvalidParams, `Prompt ${request.params.name} not found`);
      for (const arg of prompt.prompt.arguments ?? [])
        if (arg.required && request.params.arguments?.[arg.name] === undefined)
          throw new McpError(
            ErrorCode.InvalidParams,
            `Prompt ${prompt.prompt.name}: argument ${arg.name} is required`,
          );
      return prompt.get(request.params.arguments ?? {}, ctxOf(extra, request.params._meta));
    });
  }
  if (caps.completions) {
    const complete = surface.complete?.bind(surface);
    server.setRequestHandler(CompleteRequestSchema, async (request, extra) => {
      const ctx = ctxOf(extra, request.params._meta);
      for (const h of reexported) {
        const answer = h.complete(request.params, ctx);
        if (answer) return answer;
      }
      const values = complete ? await complete(request.params) : [];
      return {
        completion: {
          values: values.slice(0, MAX_COMPLETIONS),
          total: values.length,
          hasMore: values.length > MAX_COMPLETIONS,
        },
      };
    });
  }
}
