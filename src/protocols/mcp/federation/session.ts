/**
 * One session of the coordinator's `/mcp` beyond tools: federated resources (list, read,
 * templates, subscribe/unsubscribe with update notifications), prompts, completions and logging
 * (level fanned out to agents, their log messages relayed). A caller that can answer sampling,
 * elicitation or roots gets a connection of its own to each agent it calls, declaring exactly what
 * the caller declared, so what an agent asks during a call reaches exactly that caller (on the
 * call's own stream) and the call's log messages too. What the caller did not declare, the agent
 * is told it may not ask (it fails at once: -32601 from the coordinator's client).
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CompleteRequestSchema,
  CreateMessageRequestSchema,
  CreateMessageResultSchema,
  CreateMessageResultWithToolsSchema,
  ElicitRequestSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListRootsRequestSchema,
  ListRootsResultSchema,
  LoggingMessageNotificationSchema,
  McpError,
  ReadResourceRequestSchema,
  RootsListChangedNotificationSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type ClientCapabilities,
  type ClientNotification,
  type ClientRequest,
  type LoggingMessageNotification,
  type ServerCapabilities,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';
import { callerMeta, type McpCaller, type McpFederation } from './federation.js';
import { SessionLogLevel } from '../logLevel.js';
import { MAX_SUBSCRIPTIONS_PER_SESSION, SessionSubscriptions } from './subscriptions.js';
import { AmfError } from '../../../errors.js';

type Extra = RequestHandlerExtra<ServerRequest | ClientRequest, ServerNotification | ClientNotification>;

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value ?? {}));

/** A session's own connection to an agent is ended after this long without a call in flight. */
const SESSION_CLIENT_IDLE_MS = 2000;

/**
 * The capabilities the coordinator announces beyond tools: all of what agents may offer, whether
 * or not one offers it now. A session's capabilities are fixed at `initialize`, and an IDE's
 * session (through `amf mcp`, say) often opens before the agents join: announced from the start,
 * resources and prompts reach it with their `list_changed` once an agent offers them. Until then
 * the lists are empty and a name or URI is not found.
 */
export function federatedCapabilities(): ServerCapabilities {
  return {
    resources: { listChanged: true, subscribe: true },
    prompts: { listChanged: true },
    completions: {},
    // The coordinator relays agents' messages and may log itself.
    logging: {},
  };
}

/** Per-session state and handlers of the coordinator's `/mcp` beyond tools. */
export class CoordinatorMcpSession {
  private readonly level = new SessionLogLevel();
  private readonly subs = new SessionSubscriptions();
  /** Calls of this session in flight, per agent (the newest last). */
  private readonly inflight = new Map<string, Extra[]>();
  private readonly agentClients = new Map<string, Promise<Client>>();
  private readonly idleTimers = new Map<string, NodeJS.Timeout>();
  private readonly stops: Array<() => void> = [];
  private closed = false;
  /** The secret agents' names of this session derive from (never its session id, a credential). */
  private readonly key = randomUUID();

  constructor(
    private readonly server: Server,
    private readonly federation: McpFederation,
    private readonly callerAddress: string,
    private readonly capabilities: ServerCapabilities,
  ) {}

  private who(extra: Extra) {
    return this.caller(extra.sessionId ?? null);
  }

  /** Registers the handlers of the announced capabilities and the relays. */
  install(): void {
    const { server, federation } = this;
    const caps = this.capabilities;
    server.setRequestHandler(SetLevelRequestSchema, async (request) => {
      this.level.level = request.params.level;
      await federation.logLevels.set(this, request.params.level);
      await Promise.allSettled(
        [...this.agentClients.values()].map(async (c) => (await c).setLoggingLevel(request.params.level)),
      );
      return {};
    });
    this.stops.push(
      federation.onAgentLog((agentId, params) => {
        if (this.level.level !== undefined && this.level.admits(params.level)) this.relayLog(agentId, params);
      }),
    );
    server.setNotificationHandler(RootsListChangedNotificationSchema, () => this.rootsChanged());
    if (caps.resources) this.installResources();
    if (caps.prompts) {
      server.setRequestHandler(ListPromptsRequestSchema, () => ({
        prompts: federation.extras().prompts.list(),
      }));
      server.setRequestHandler(GetPromptRequestSchema, (request, extra) => {
        const { name, arguments: args } = request.params;
        const target = federation.extras().prompts.resolve(name);
        const who = this.who(extra);
        return federation.forward('prompt', name, target, bytes(args), who, (c) =>
          c.getPrompt({
            name: target!.name,
            ...(args ? { arguments: args } : {}),
            ...withMeta(who, target!.agentId),
          }),
        );
      });
    }
    if (caps.completions)
      server.setRequestHandler(CompleteRequestSchema, (request, extra) => {
        const { ref } = request.params;
        const extras = federation.extras();
        const found =
          ref.type === 'ref/prompt'
            ? extras.prompts.resolve(ref.name)
            : (() => {
                const t = extras.resources.resolveTemplate(ref.uri);
                return t ? { agentId: t.agentId, name: t.template } : undefined;
              })();
        const wire = ref.type === 'ref/prompt' ? ref.name : ref.uri;
        const who = this.who(extra);
        return federation.forward('completion', wire, found, bytes(request.params), who, (c) =>
          c.complete({
            ...request.params,
            ref: ref.type === 'ref/prompt' ? { ...ref, name: found!.name } : { ...ref, uri: found!.name },
            ...withMeta(who, found!.agentId),
          }),
        );
      });
  }

  private installResources(): void {
    const { server, federation } = this;
    server.setRequestHandler(ListResourcesRequestSchema, () => ({
      resources: federation.extras().resources.list(),
    }));
    server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
      resourceTemplates: federation.extras().resources.templates(),
    }));
    server.setRequestHandler(ReadResourceRequestSchema, async (request, extra) => {
      const uri = request.params.uri;
      const target = federation.extras().resources.resolve(uri);
      const named = target && { agentId: target.agentId, name: target.uri };
      const who = this.who(extra);
      const result = await federation.forward('resource', uri, named, bytes(uri), who, (c) =>
        c.readResource({ uri: target!.uri, ...withMeta(who, target!.agentId) }),
      );
      // The caller sees the URI it asked for, not the agent's own.
      return {
        ...result,
        contents: result.contents.map((c) => (c.uri === target!.uri ? { ...c, uri } : c)),
      };
    });
    if (!this.capabilities.resources?.subscribe) return;
    server.setRequestHandler(SubscribeRequestSchema, async (request, extra) => {
      const uri = request.params.uri;
      if (this.subs.byUri.has(uri)) return {};
      if (this.subs.byUri.size >= MAX_SUBSCRIPTIONS_PER_SESSION)
        throw new McpError(
          ErrorCode.InvalidRequest,
          `at most ${MAX_SUBSCRIPTIONS_PER_SESSION} subscriptions per session`,
        );
      const target = federation.extras().resources.resolve(uri);
      const named = target && { agentId: target.agentId, name: target.uri };
      await federation.forward('resource', uri, named, bytes(uri), this.who(extra), (c) =>
        federation.subscriptions.acquire(target!.agentId, target!.uri, c),
      );
      this.subs.byUri.set(uri, target!);
      return {};
    });
    server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
      this.unsubscribe(request.params.uri);
      return {};
    });
    this.stops.push(
      federation.onResourceUpdated((agentId, uri) => {
        for (const federated of this.subs.federatedUris(agentId, uri))
          void server.sendResourceUpdated({ uri: federated }).catch(() => undefined);
      }),
    );
  }

  private unsubscribe(uri: string): void {
    const target = this.subs.byUri.get(uri);
    if (!target) return;
    this.subs.byUri.delete(uri);
    this.federation.subscriptions.release(target.agentId, target.uri, (id) =>
      this.federation.sharedClient(id),
    );
  }

  /** A log message of `agentId` to this session: on a call's stream when one to that agent is open. */
  private relayLog(agentId: string, params: LoggingMessageNotification['params']): void {
    const prefix = this.federation.prefixOf(agentId);
    const notification = {
      method: 'notifications/message' as const,
      params: { ...params, logger: params.logger ? `${prefix}/${params.logger}` : prefix },
    };
    const call = this.inflight.get(agentId)?.at(-1);
    const send = call ? call.sendNotification(notification) : this.server.notification(notification);
    void send.catch(() => undefined);
  }

  /** Who a call of this session is, as the federation records it and names it to agents. */
  caller(sessionId: string | null): McpCaller {
    return { caller: this.callerAddress, sessionId, key: this.key };
  }

  /**
   * True when a plain `tools/call` of this session needs nothing from its SDK server: no log level
   * was set (nothing is relayed on the call's stream) and the caller answers neither sampling nor
   * elicitation (no connection of its own to the agent). Such calls may take the fast path.
   */
  takesPlainCalls(): boolean {
    return !this.closed && this.level.level === undefined && this.clientSupplier() === undefined;
  }

  /** Marks a call of this session to `agentId` in flight; returns the function that ends it. */
  track(agentId: string, extra: Extra): () => void {
    const list = this.inflight.get(agentId) ?? [];
    list.push(extra);
    this.inflight.set(agentId, list);
    clearTimeout(this.idleTimers.get(agentId));
    this.idleTimers.delete(agentId);
    return () => {
      const i = list.indexOf(extra);
      if (i >= 0) list.splice(i, 1);
      if (list.length > 0) return;
      this.inflight.delete(agentId);
      // Idle own connections are ended (and the agent's session with them): callers that never end
      // their own sessions must not pile up sessions at the agent.
      if (!this.agentClients.has(agentId)) return;
      const timer = setTimeout(() => this.endAgentClient(agentId), SESSION_CLIENT_IDLE_MS);
      timer.unref();
      this.idleTimers.set(agentId, timer);
    };
  }

  /**
   * The client calls of this session go through: its own per-agent connection when the caller can
   * answer sampling, elicitation or roots, else undefined (the federation's shared client).
   */
  clientSupplier(): ((agentId: string) => Promise<Client>) | undefined {
    const relayed = relayedCapabilities(this.server.getClientCapabilities());
    if (!relayed) return undefined;
    return (agentId) => {
      let pending = this.agentClients.get(agentId);
      if (!pending) {
        pending = this.openAgentClient(agentId, relayed);
        pending.catch(() => this.agentClients.delete(agentId));
        this.agentClients.set(agentId, pending);
      }
      return pending;
    };
  }

  private async openAgentClient(agentId: string, capabilities: ClientCapabilities): Promise<Client> {
    const relayTo = () => this.inflight.get(agentId)?.at(-1);
    const client = await this.federation.openSessionClient(agentId, capabilities, (c) => {
      // Only what the caller declared: the SDK client refuses a handler for anything else, and
      // the agent gets -32601 for a request the caller could not answer.
      if (capabilities.sampling)
        c.setRequestHandler(CreateMessageRequestSchema, (request, extra) => {
          const call = relayTo();
          const withTools = request.params.tools !== undefined || request.params.toolChoice !== undefined;
          const schema = withTools ? CreateMessageResultWithToolsSchema : CreateMessageResultSchema;
          const ask = { method: 'sampling/createMessage' as const, params: request.params };
          return call
            ? call.sendRequest(ask, schema, { signal: extra.signal })
            : this.server.request(ask, schema, { signal: extra.signal });
        });
      if (capabilities.elicitation)
        c.setRequestHandler(ElicitRequestSchema, (request, extra) => {
          const call = relayTo();
          const ask = { method: 'elicitation/create' as const, params: request.params };
          return call
            ? call.sendRequest(ask, ElicitResultSchema, { signal: extra.signal })
            : this.server.request(ask, ElicitResultSchema, { signal: extra.signal });
        });
      if (capabilities.roots)
        c.setRequestHandler(ListRootsRequestSchema, (request, extra) => {
          const call = relayTo();
          const ask = {
            method: 'roots/list' as const,
            ...(request.params ? { params: request.params } : {}),
          };
          return call
            ? call.sendRequest(ask, ListRootsResultSchema, { signal: extra.signal })
            : this.server.request(ask, ListRootsResultSchema, { signal: extra.signal });
        });
      c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
        if (this.level.admits(n.params.level)) this.relayLog(agentId, n.params);
      });
    });
    if (this.closed) {
      await client.close();
      throw new AmfError('UNAVAILABLE', 'session ended');
    }
    if (this.level.level) await client.setLoggingLevel(this.level.level).catch(() => undefined);
    return client;
  }

  /** Tells the session's own agent connections that the caller's roots changed. */
  private rootsChanged(): void {
    for (const pending of this.agentClients.values())
      void pending.then((c) => c.sendRootsListChanged()).catch(() => undefined);
  }

  private endAgentClient(agentId: string): void {
    this.idleTimers.delete(agentId);
    const pending = this.agentClients.get(agentId);
    this.agentClients.delete(agentId);
    void pending?.then(endClient).catch(() => undefined);
  }

  /** Ends the session's subscriptions, own agent connections and listeners. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const stop of this.stops) stop();
    for (const uri of [...this.subs.byUri.keys()]) this.unsubscribe(uri);
    this.federation.logLevels.forget(this);
    for (const timer of this.idleTimers.values()) clearTimeout(timer);
    for (const agentId of [...this.agentClients.keys()]) this.endAgentClient(agentId);
  }
}

/** Ends an agent session (HTTP DELETE) and closes the client. */
async function endClient(client: Client): Promise<void> {
  const transport = client.transport as StreamableHTTPClientTransport | undefined;
  await transport?.terminateSession().catch(() => undefined);
  await client.close();
}

/**
 * What a session's own connections to agents declare: the caller's sampling, elicitation and
 * roots, as the caller declared them; undefined when it declared none of them.
 */
function relayedCapabilities(caller: ClientCapabilities | undefined): ClientCapabilities | undefined {
  if (!caller?.sampling && !caller?.elicitation && !caller?.roots) return undefined;
  return {
    ...(caller.sampling ? { sampling: caller.sampling } : {}),
    ...(caller.elicitation ? { elicitation: caller.elicitation } : {}),
    ...(caller.roots ? { roots: caller.roots } : {}),
  };
}

/** `{ _meta }` naming `who` to agent `agentId`, or nothing. */
function withMeta(who: McpCaller, agentId: string): { _meta?: Record<string, string> } {
  const meta = callerMeta(who, agentId);
  return meta ? { _meta: meta } : {};
}
