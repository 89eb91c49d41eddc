/**
 * Re-exporting a worker's configured MCP servers (`mcp.servers`, the hub handlers use as
 * `ctx.tools`) on the worker's own `/mcp`, so the coordinator federates them with the worker:
 * their allowed tools under the hub's names (`<server>__<tool>`), their prompts as
 * `<server>__<prompt>`, their resources and templates as `amf://<server>/<uri>`, with what else
 * MCP carries: completions, subscriptions, log levels and messages, progress, and the server's
 * sampling, elicitation and roots requests, asked of the caller.
 *
 * A server that keeps state per session (every stdio server, an HTTP server that gives a session
 * id) gets a session per caller, declaring what that caller declared; a caller is a session of the
 * worker's `/mcp`, or one caller behind the coordinator's link, which names it in `_meta`
 * (`amf/caller`, protocols/mcp/workerCallers.ts). So one caller's log level, subscriptions or toggles never reach another. At most
 * {@link MAX_CALLER_SESSIONS} such sessions per server are open; the least recently used idle one
 * makes room for a new caller, and one idle for {@link CALLER_SESSION_IDLE_MS} is closed. Other
 * callers share the hub's own session.
 *
 * What the server offers is listed once when the worker starts, over a session that declares
 * sampling, elicitation and roots (servers list some tools only to clients that can answer them).
 * Results are passed through unchanged.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  McpError,
  ResourceUpdatedNotificationSchema,
  type CallToolResult,
  type ClientCapabilities,
  type CompleteRequest,
  type CompleteResult,
  type LoggingLevel,
  type LoggingMessageNotification,
  type Result,
  type ServerCapabilities,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import { TOOL_NAMESPACE_SEPARATOR, toolAllowed, type McpClientHub } from '../mcpClient/mcpClientHub.js';
import type {
  HandlerMcpPrompt,
  HandlerMcpResource,
  HandlerMcpResourceTemplate,
  HandlerMcpSurface,
  HandlerMcpTool,
  McpRequestContext,
} from './handlerMcp.js';
import { AmfError } from '../errors.js';

/**
 * A session of a worker's `/mcp`. What it sets (a log level, subscriptions) holds for every caller
 * of the session: through the coordinator's link, the coordinator sets them once for all of its
 * callers.
 */
export interface McpSessionScope {
  readonly id: string;
  /** Called once, when the session ends. */
  onClose(listener: () => void): void;
}

/** The caller of a request on a worker's `/mcp`, as a re-exported server needs to know it. */
export interface McpCallerSession {
  /** Stable for the caller's session, distinct between callers. */
  readonly key: string;
  /**
   * Named by the coordinator (`_meta["amf/caller"]`): the same caller may come back over another
   * worker session (the coordinator's own connections to an agent end when idle), so what it holds
   * at a re-exported server outlives the worker session it came in, until idle expiry.
   */
  readonly named: boolean;
  /** The worker session the caller's requests come in (the latest one, for a named caller). */
  readonly session: McpSessionScope;
  /** What the caller declared at `initialize`. */
  readonly capabilities: ClientCapabilities;
  /** Sends the caller a notification (a log message, a resource update). */
  notify(notification: ServerNotification): Promise<void>;
  /** Asks the caller (sampling, elicitation, roots) outside any call of its. */
  ask(request: ServerRequest, signal: AbortSignal): Promise<Result>;
  /** Called once, when the caller's session ends. */
  onClose(listener: () => void): void;
}

/** A request context of the worker's `/mcp`, with what its endpoint knows beyond a handler's. */
export interface CallerContext extends McpRequestContext {
  /** Who is behind the request. */
  caller?: McpCallerSession;
  /**
   * Ends the request's SSE stream now, before its result: the client resumes it (`GET` with
   * `Last-Event-ID`) and gets the result there (SEP-1699 polling). Present when the client's
   * revision allows it (2025-11-25 on).
   */
  closeStream?: () => void;
}

/**
 * What a re-exported server needs from the worker's endpoint beyond a handler's surface: the
 * caller's subscriptions, log level and completions forwarded to the server.
 */
export interface ReexportHooks {
  /** The server offers resource subscriptions. */
  readonly subscribe: boolean;
  /** The server offers completions. */
  readonly completions: boolean;
  /** Subscribes the caller to `uri` when it is one of this server's; false when it is not. */
  onSubscribe(uri: string, ctx: CallerContext): Promise<boolean>;
  onUnsubscribe(uri: string, ctx: CallerContext): Promise<void>;
  onSetLevel(level: LoggingLevel, ctx: CallerContext): Promise<void>;
  /** The completion of a re-exported prompt or template; undefined when the reference is not one. */
  complete(params: CompleteRequest['params'], ctx: CallerContext): Promise<CompleteResult> | undefined;
}

/** A surface that may re-export servers (what {@link reexportSurface} and {@link mergeSurfaces} return). */
export interface ReexportedSurface extends HandlerMcpSurface {
  reexported?: ReexportHooks[];
}

/** Most items of one kind re-exported per server. */
const MAX_PER_SERVER = 500;
/** Most sessions of their own that callers hold with one re-exported server. */
export const MAX_CALLER_SESSIONS = 16;
/** A caller's own session with a re-exported server is closed after this long without a request. */
export const CALLER_SESSION_IDLE_MS = 10 * 60_000;
const SCHEME = 'amf://';

/** What the listing session declares, so that the server lists everything it may offer. */
const LISTING_CAPABILITIES: ClientCapabilities = {
  sampling: {},
  elicitation: { form: {}, url: {} },
  roots: { listChanged: true },
};

function uriOf(server: string, uri: string): string {
  return `${SCHEME}${server}/${uri}`;
}

/** The server URI behind a re-exported one (undefined when it is not `amf://<server>/...`). */
function serverUri(server: string, uri: string): string | undefined {
  const prefix = `${SCHEME}${server}/`;
  return uri.startsWith(prefix) ? uri.slice(prefix.length) : undefined;
}

/** What a caller's own session declares: the caller's sampling, elicitation and roots. */
function relayed(capabilities: ClientCapabilities | undefined): ClientCapabilities {
  return {
    ...(capabilities?.sampling ? { sampling: capabilities.sampling } : {}),
    ...(capabilities?.elicitation ? { elicitation: capabilities.elicitation } : {}),
    ...(capabilities?.roots ? { roots: capabilities.roots } : {}),
  };
}

/** One caller's own session with a server. */
interface CallerUpstream {
  caller: McpCallerSession;
  client: Promise<Client>;
  /** Requests of the caller in flight on it, the newest last (where the server's requests go). */
  inflight: CallerContext[];
  lastUsed: number;
  closed: boolean;
}

/** What a worker session set for its callers' sessions with one server. */
interface SessionSettings {
  level?: LoggingLevel;
  subscriptions: Set<string>;
}

/** The sessions callers hold with one re-exported server, and the hub's shared one. */
class ServerSessions {
  private readonly own = new Map<string, CallerUpstream>();
  /** Per worker session: its log level and subscriptions, applied to its callers' own sessions. */
  private readonly settings = new Map<McpSessionScope, SessionSettings>();
  /** Callers subscribed through the shared session, per server URI. */
  private readonly sharedSubscribers = new Map<string, Map<string, McpCallerSession>>();
  private sweep: NodeJS.Timeout | undefined;

  constructor(
    private readonly hub: McpClientHub,
    readonly server: string,
  ) {
    // The shared session's updates reach the callers that subscribed through it.
    hub.clientOf(server)?.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      for (const caller of this.sharedSubscribers.get(n.params.uri)?.values() ?? [])
        void caller
          .notify({ method: 'notifications/resources/updated', params: { uri: uriOf(server, n.params.uri) } })
          .catch(() => undefined);
    });
  }

  /** The settings of `session`, forgotten when it ends. */
  private settingsOf(session: McpSessionScope): SessionSettings {
    let found = this.settings.get(session);
    if (!found) {
      found = { subscriptions: new Set() };
      this.settings.set(session, found);
      session.onClose(() => this.settings.delete(session));
    }
    return found;
  }

  /** The callers' own sessions that belong to worker session `session`. */
  private ownOf(session: McpSessionScope): CallerUpstream[] {
    return [...this.own.values()].filter((u) => u.caller.session === session);
  }

  /** True when `caller` gets a session of its own with the server. */
  private ownsSession(caller: McpCallerSession | undefined): boolean {
    if (!caller) return false;
    return this.hub.isStateful(this.server) || Object.keys(relayed(caller.capabilities)).length > 0;
  }

  /** Runs `run` on the session `ctx`'s caller uses, marking the request in flight there. */
  async use<T>(ctx: CallerContext | undefined, run: (client: Client) => Promise<T>): Promise<T> {
    const caller = ctx?.caller;
    if (!caller || !this.ownsSession(caller)) {
      const shared = this.hub.clientOf(this.server);
      if (!shared)
        throw new McpError(ErrorCode.InternalError, `MCP server "${this.server}" is not connected`);
      return run(shared);
    }
    const upstream = this.upstreamOf(caller);
    if (ctx) upstream.inflight.push(ctx);
    upstream.lastUsed = Date.now();
    try {
      return await run(await upstream.client);
    } finally {
      if (ctx) upstream.inflight.splice(upstream.inflight.lastIndexOf(ctx), 1);
      upstream.lastUsed = Date.now();
    }
  }

  private upstreamOf(caller: McpCallerSession): CallerUpstream {
    const existing = this.own.get(caller.key);
    if (existing) {
      // A named caller may come back over another worker session: answer it there.
      existing.caller = caller;
      return existing;
    }
    if (this.own.size >= MAX_CALLER_SESSIONS) this.evictIdle();
    // `client` is set right below: opening needs the record (its calls in flight, whether it closed).
    const upstream = {
      caller,
      inflight: [],
      lastUsed: Date.now(),
      closed: false,
    } as unknown as CallerUpstream;
    upstream.client = this.open(upstream);
    upstream.client.catch(() => this.forget(upstream));
    this.own.set(caller.key, upstream);
    // A named caller outlives the worker session it came in (idle expiry ends its session here).
    if (!caller.named) caller.onClose(() => this.close(upstream));
    this.sweep ??= setInterval(() => this.expireIdle(), Math.min(60_000, CALLER_SESSION_IDLE_MS / 4));
    this.sweep.unref();
    return upstream;
  }

  /** Closes the least recently used idle caller session; refuses when every one is busy. */
  private evictIdle(): void {
    let victim: CallerUpstream | undefined;
    for (const u of this.own.values())
      if (u.inflight.length === 0 && (!victim || u.lastUsed < victim.lastUsed)) victim = u;
    if (!victim)
      throw new McpError(
        ErrorCode.InternalError,
        `MCP server "${this.server}": all ${MAX_CALLER_SESSIONS} caller sessions are in use; try again once a call ends`,
      );
    this.close(victim);
  }

  private expireIdle(): void {
    const cutoff = Date.now() - CALLER_SESSION_IDLE_MS;
    for (const u of this.own.values()) if (u.inflight.length === 0 && u.lastUsed < cutoff) this.close(u);
  }

  private async open(upstream: CallerUpstream): Promise<Client> {
    const capabilities = relayed(upstream.caller.capabilities);
    const current = () => upstream.inflight.at(-1);
    // Read at each use: a named caller may have moved to another worker session since.
    const caller = {
      ask: (request: ServerRequest, signal: AbortSignal) => upstream.caller.ask(request, signal),
      notify: (notification: ServerNotification) => upstream.caller.notify(notification),
    };
    const client = await this.hub.openSession(this.server, capabilities, (c) => {
      // Asked of the caller: on the stream of its call in flight when there is one.
      if (capabilities.sampling)
        c.setRequestHandler(CreateMessageRequestSchema, (request, extra) => {
          const ctx = current();
          if (ctx) return ctx.sample(request.params);
          return caller.ask(request, extra.signal) as ReturnType<McpRequestContext['sample']>;
        });
      if (capabilities.elicitation)
        c.setRequestHandler(ElicitRequestSchema, (request, extra) => {
          const ctx = current();
          if (ctx) return ctx.elicit(request.params);
          return caller.ask(request, extra.signal) as ReturnType<McpRequestContext['elicit']>;
        });
      if (capabilities.roots)
        c.setRequestHandler(ListRootsRequestSchema, (request, extra) =>
          caller.ask(request, extra.signal).then((r) => r as { roots: [] }),
        );
      c.setNotificationHandler(LoggingMessageNotificationSchema, (n) =>
        this.relayLog(upstream.caller, n.params),
      );
      c.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
        void caller
          .notify({
            method: 'notifications/resources/updated',
            params: { uri: uriOf(this.server, n.params.uri) },
          })
          .catch(() => undefined);
      });
    });
    // What the caller's worker session set holds for this session too.
    const settings = this.settings.get(upstream.caller.session);
    if (settings?.level && client.getServerCapabilities()?.logging)
      await client.setLoggingLevel(settings.level).catch(() => undefined);
    for (const uri of settings?.subscriptions ?? [])
      await client.subscribeResource({ uri }).catch(() => undefined);
    if (upstream.closed) {
      void endSession(client);
      throw new AmfError('UNAVAILABLE', 'the caller left');
    }
    return client;
  }

  private relayLog(caller: McpCallerSession, params: LoggingMessageNotification['params']): void {
    const logger = params.logger ? `${this.server}/${params.logger}` : this.server;
    void caller
      .notify({ method: 'notifications/message', params: { ...params, logger } })
      .catch(() => undefined);
  }

  private forget(upstream: CallerUpstream): void {
    if (this.own.get(upstream.caller.key) === upstream) this.own.delete(upstream.caller.key);
    if (this.own.size === 0 && this.sweep) {
      clearInterval(this.sweep);
      this.sweep = undefined;
    }
  }

  private close(upstream: CallerUpstream): void {
    if (upstream.closed) return;
    upstream.closed = true;
    this.forget(upstream);
    void upstream.client.then(endSession, () => undefined);
  }

  /**
   * Subscribes the caller's worker session to `uri`: at each of its callers' own sessions (the
   * caller's opened if need be, and those opened later), or at the shared session with a note of
   * who asked.
   */
  async subscribe(uri: string, ctx: CallerContext): Promise<void> {
    const caller = ctx.caller;
    if (!caller || !this.ownsSession(caller)) {
      await this.use(ctx, (c) => c.subscribeResource({ uri }));
      if (caller) {
        let callers = this.sharedSubscribers.get(uri);
        if (!callers) this.sharedSubscribers.set(uri, (callers = new Map()));
        callers.set(caller.key, caller);
      }
      return;
    }
    this.settingsOf(caller.session).subscriptions.add(uri);
    await this.use(ctx, (c) => c.subscribeResource({ uri }));
    await Promise.allSettled(
      this.ownOf(caller.session)
        .filter((u) => u.caller !== caller)
        .map(async (u) => (await u.client).subscribeResource({ uri })),
    );
  }

  async unsubscribe(uri: string, ctx: CallerContext): Promise<void> {
    const caller = ctx.caller;
    if (!caller || !this.ownsSession(caller)) {
      const callers = caller ? this.sharedSubscribers.get(uri) : undefined;
      callers?.delete(caller!.key);
      // Others still subscribed through the shared session keep its subscription.
      if (callers && callers.size > 0) return;
      this.sharedSubscribers.delete(uri);
      await this.use(ctx, (c) => c.unsubscribeResource({ uri }));
      return;
    }
    this.settings.get(caller.session)?.subscriptions.delete(uri);
    await Promise.allSettled(
      this.ownOf(caller.session).map(async (u) => (await u.client).unsubscribeResource({ uri })),
    );
  }

  /** Sets the log level of the caller's worker session: at each of its callers' own sessions. */
  async setLevel(level: LoggingLevel, ctx: CallerContext): Promise<void> {
    const caller = ctx.caller;
    if (!caller || !this.ownsSession(caller)) {
      await this.use(ctx, (c) => c.setLoggingLevel(level));
      return;
    }
    this.settingsOf(caller.session).level = level;
    await Promise.allSettled(
      this.ownOf(caller.session).map(async (u) => (await u.client).setLoggingLevel(level)),
    );
  }
}

/** Ends a caller's own session: DELETE for an HTTP server, then the client (and a stdio process). */
async function endSession(client: Client): Promise<void> {
  const transport = client.transport as Partial<StreamableHTTPClientTransport> | undefined;
  if (typeof transport?.terminateSession === 'function')
    await transport.terminateSession().catch(() => undefined);
  await client.close().catch(() => undefined);
}

/** What one server offers, read over a session that declares everything a server may ask. */
async function listServer(
  hub: McpClientHub,
  server: string,
): Promise<{ client: Client; close: () => Promise<void> }> {
  try {
    const refuse = () =>
      Promise.reject(new McpError(ErrorCode.MethodNotFound, 'the worker lists what this server offers'));
    const client = await hub.openSession(server, LISTING_CAPABILITIES, (c) => {
      c.setRequestHandler(CreateMessageRequestSchema, refuse);
      c.setRequestHandler(ElicitRequestSchema, refuse);
      c.setRequestHandler(ListRootsRequestSchema, () => ({ roots: [] }));
    });
    return { client, close: () => endSession(client) };
  } catch {
    // A server that takes no second session: what it lists to the hub's own.
    const shared = hub.clientOf(server)!;
    return { client: shared, close: () => Promise.resolve() };
  }
}

async function serverSurface(hub: McpClientHub, server: string): Promise<ReexportedSurface> {
  const sessions = new ServerSessions(hub, server);
  const timeout = hub.timeoutOf(server);
  const listing = await listServer(hub, server);
  try {
    const client = listing.client;
    const caps: ServerCapabilities = client.getServerCapabilities() ?? {};
    const filter = hub.configOf(server)?.tools ?? { allow: null, deny: [] };
    const tools: HandlerMcpTool[] = [];
    const resources: HandlerMcpResource[] = [];
    const resourceTemplates: HandlerMcpResourceTemplate[] = [];
    const prompts: HandlerMcpPrompt[] = [];
    const read = async (uri: string, ctx: CallerContext) => {
      const result = await sessions.use(ctx, (c) => c.readResource({ uri }, { signal: ctx.signal, timeout }));
      return { ...result, contents: result.contents.map((c) => ({ ...c, uri: uriOf(server, c.uri) })) };
    };
    if (caps.tools) {
      const listed = (await client.listTools()).tools.filter((t) => toolAllowed(filter, t.name));
      for (const t of listed.slice(0, MAX_PER_SERVER))
        tools.push({
          definition: { ...t, name: `${server}${TOOL_NAMESPACE_SEPARATOR}${t.name}` },
          call: (args, ctx: CallerContext) =>
            sessions.use(ctx, async (c) => {
              // The caller hears of all progress before the result.
              const relayed: Array<Promise<void>> = [];
              const result = (await c.callTool({ name: t.name, arguments: args }, undefined, {
                signal: ctx.signal,
                timeout,
                resetTimeoutOnProgress: true,
                onprogress: (p) => void relayed.push(ctx.progress(p.progress, p.total, p.message)),
              })) as CallToolResult;
              await Promise.allSettled(relayed);
              return result;
            }),
        });
    }
    if (caps.resources) {
      for (const r of (await client.listResources()).resources.slice(0, MAX_PER_SERVER))
        resources.push({ resource: { ...r, uri: uriOf(server, r.uri) }, read: (ctx) => read(r.uri, ctx) });
      const templates = (await client.listResourceTemplates()).resourceTemplates.slice(0, MAX_PER_SERVER);
      for (const t of templates)
        resourceTemplates.push({
          template: { ...t, uriTemplate: uriOf(server, t.uriTemplate) },
          read: (uri, _vars, ctx) => read(serverUri(server, uri) ?? uri, ctx),
        });
    }
    if (caps.prompts) {
      for (const p of (await client.listPrompts()).prompts.slice(0, MAX_PER_SERVER))
        prompts.push({
          prompt: { ...p, name: `${server}${TOOL_NAMESPACE_SEPARATOR}${p.name}` },
          get: (args, ctx: CallerContext) =>
            sessions.use(ctx, (c) =>
              c.getPrompt({ name: p.name, arguments: args }, { signal: ctx.signal, timeout }),
            ),
        });
    }
    const promptPrefix = `${server}${TOOL_NAMESPACE_SEPARATOR}`;
    const hooks: ReexportHooks = {
      subscribe: caps.resources?.subscribe === true,
      completions: caps.completions !== undefined,
      async onSubscribe(uri, ctx) {
        const own = serverUri(server, uri);
        if (own === undefined || !caps.resources?.subscribe) return false;
        await sessions.subscribe(own, ctx);
        return true;
      },
      async onUnsubscribe(uri, ctx) {
        const own = serverUri(server, uri);
        if (own !== undefined && caps.resources?.subscribe) await sessions.unsubscribe(own, ctx);
      },
      async onSetLevel(level, ctx) {
        if (caps.logging) await sessions.setLevel(level, ctx);
      },
      complete(params, ctx) {
        if (!caps.completions) return undefined;
        const { ref } = params;
        const mapped =
          ref.type === 'ref/prompt'
            ? ref.name.startsWith(promptPrefix)
              ? { ...ref, name: ref.name.slice(promptPrefix.length) }
              : undefined
            : ((own) => (own === undefined ? undefined : { ...ref, uri: own }))(serverUri(server, ref.uri));
        if (!mapped) return undefined;
        return sessions.use(ctx, (c) =>
          c.complete({ ...params, ref: mapped }, { signal: ctx.signal, timeout }),
        );
      },
    };
    return {
      tools,
      resources,
      resourceTemplates,
      prompts,
      ...(caps.logging ? { logging: true } : {}),
      reexported: [hooks],
    };
  } finally {
    await listing.close();
  }
}

/** The surface that re-exports every connected server of `hub` (a server that fails is skipped). */
export async function reexportSurface(
  hub: McpClientHub,
  onError: (server: string, err: unknown) => void = () => undefined,
): Promise<ReexportedSurface> {
  const parts = await Promise.all(
    hub.servers.map((server) =>
      serverSurface(hub, server).catch((err: unknown): ReexportedSurface => {
        onError(server, err);
        return {};
      }),
    ),
  );
  return mergeSurfaces(...parts);
}

/**
 * One surface of several: lists joined; the first `subscriptions` wins; a completion goes to the
 * re-exported server it names, else to the first surface's `complete`.
 */
export function mergeSurfaces(...surfaces: Array<ReexportedSurface | undefined>): ReexportedSurface {
  const all = surfaces.filter((s): s is ReexportedSurface => s !== undefined);
  const complete = all.find((s) => s.complete)?.complete;
  const subscriptions = all.find((s) => s.subscriptions)?.subscriptions;
  const reexported = all.flatMap((s) => s.reexported ?? []);
  return {
    tools: all.flatMap((s) => s.tools ?? []),
    resources: all.flatMap((s) => s.resources ?? []),
    resourceTemplates: all.flatMap((s) => s.resourceTemplates ?? []),
    prompts: all.flatMap((s) => s.prompts ?? []),
    ...(complete ? { complete } : {}),
    ...(subscriptions ? { subscriptions } : {}),
    ...(all.some((s) => s.logging) ? { logging: true } : {}),
    ...(reexported.length > 0 ? { reexported } : {}),
  };
}
