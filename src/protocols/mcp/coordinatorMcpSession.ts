/**
 * One session of the coordinator's `/mcp` beyond tools: federated resources (list, read,
 * templates, subscribe/unsubscribe with update notifications), prompts, completions and logging
 * (level fanned out to agents, their log messages relayed). A caller that can answer sampling or
 * elicitation gets a connection of its own to each agent it calls, so what an agent asks during a
 * call reaches exactly that caller (on the call's own stream) and the call's log messages too.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CompleteRequestSchema,
  CreateMessageRequestSchema,
  CreateMessageResultSchema,
  ElicitRequestSchema,
  ElicitResultSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  LoggingMessageNotificationSchema,
  McpError,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type ClientNotification,
  type ClientRequest,
  type LoggingMessageNotification,
  type ServerCapabilities,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { McpFederation } from './federation.js';
import { SessionLogLevel } from './mcpLogLevel.js';
import { MAX_SUBSCRIPTIONS_PER_SESSION, SessionSubscriptions } from './federatedSubscriptions.js';

type Extra = RequestHandlerExtra<ServerRequest | ClientRequest, ServerNotification | ClientNotification>;

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value ?? {}));

/** A session's own connection to an agent is ended after this long without a call in flight. */
const SESSION_CLIENT_IDLE_MS = 2000;

/** The capabilities the coordinator announces for what its agents offer right now. */
export function federatedCapabilities(federation: McpFederation): ServerCapabilities {
  const { offers } = federation.extras();
  return {
    ...(offers.resources
      ? { resources: { listChanged: true, ...(offers.subscribe ? { subscribe: true } : {}) } }
      : {}),
    ...(offers.prompts ? { prompts: { listChanged: true } } : {}),
    ...(offers.completions ? { completions: {} } : {}),
    // Logging is always offered: the coordinator relays agents' messages and may log itself.
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
    if (caps.resources) this.installResources();
    if (caps.prompts) {
      server.setRequestHandler(ListPromptsRequestSchema, () => ({
        prompts: federation.extras().prompts.list(),
      }));
      server.setRequestHandler(GetPromptRequestSchema, (request, extra) => {
        const { name, arguments: args } = request.params;
        const target = federation.extras().prompts.resolve(name);
        return federation.forward('prompt', name, target, bytes(args), this.who(extra), (c) =>
          c.getPrompt({ name: target!.name, ...(args ? { arguments: args } : {}) }),
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
        return federation.forward('completion', wire, found, bytes(request.params), this.who(extra), (c) =>
          c.complete({
            ...request.params,
            ref: ref.type === 'ref/prompt' ? { ...ref, name: found!.name } : { ...ref, uri: found!.name },
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
      const result = await federation.forward('resource', uri, named, bytes(uri), this.who(extra), (c) =>
        c.readResource({ uri: target!.uri }),
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

  /** Who a call of this session is, as the federation records it. */
  caller(sessionId: string | null): { caller: string; sessionId: string | null } {
    return { caller: this.callerAddress, sessionId };
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
   * answer sampling or elicitation, else undefined (the federation's shared client).
   */
  clientSupplier(): ((agentId: string) => Promise<Client>) | undefined {
    const client = this.server.getClientCapabilities();
    if (!client?.sampling && !client?.elicitation) return undefined;
    return (agentId) => {
      let pending = this.agentClients.get(agentId);
      if (!pending) {
        pending = this.openAgentClient(agentId, client);
        pending.catch(() => this.agentClients.delete(agentId));
        this.agentClients.set(agentId, pending);
      }
      return pending;
    };
  }

  private async openAgentClient(
    agentId: string,
    capabilities: NonNullable<ReturnType<Server['getClientCapabilities']>>,
  ): Promise<Client> {
    const relayTo = () => this.inflight.get(agentId)?.at(-1);
    const client = await this.federation.openSessionClient(
      agentId,
      {
        ...(capabilities.sampling ? { sampling: capabilities.sampling } : {}),
        ...(capabilities.elicitation ? { elicitation: capabilities.elicitation } : {}),
      },
      (c) => {
        c.setRequestHandler(CreateMessageRequestSchema, (request) => {
          const call = relayTo();
          return call
            ? call.sendRequest(
                { method: 'sampling/createMessage', params: request.params },
                CreateMessageResultSchema,
              )
            : this.server.createMessage(request.params);
        });
        c.setRequestHandler(ElicitRequestSchema, (request) => {
          const call = relayTo();
          return call
            ? call.sendRequest({ method: 'elicitation/create', params: request.params }, ElicitResultSchema)
            : this.server.elicitInput(request.params);
        });
        c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
          if (this.level.admits(n.params.level)) this.relayLog(agentId, n.params);
        });
      },
    );
    if (this.closed) {
      await client.close();
      throw new Error('session ended');
    }
    if (this.level.level) await client.setLoggingLevel(this.level.level).catch(() => undefined);
    return client;
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
