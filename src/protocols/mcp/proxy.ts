/**
 * An MCP proxy from one downstream client (an IDE on stdio, for `amf mcp`) to a Streamable HTTP
 * MCP endpoint (the coordinator's `/mcp`): everything that endpoint offers, both ways.
 *
 * - Downstream requests, forwarded as they are for each capability the endpoint announced: tools
 *   (list, call), resources (list, templates, read, subscribe, unsubscribe), prompts (list, get),
 *   completions and logging levels, with the caller's progress relayed under its own token.
 * - Upstream notifications, relayed: list changes, resource updates, log messages.
 * - Upstream requests, forwarded to the downstream client: sampling, elicitation, roots.
 *
 * Capabilities are negotiated end to end. The proxy announces downstream what the endpoint
 * announced, and the upstream session declares what the downstream client declared: the endpoint
 * needs that session's capabilities at its `initialize`, which comes before the IDE's, so the proxy
 * first connects without any (which also fails fast on a wrong URL or key) and, once the IDE has
 * said what it can answer, reconnects declaring exactly that. A client that declared no sampling
 * is thus never asked for it: the tool that needs it fails at once, at the agent.
 *
 * An upstream session that ended (the coordinator restarted: 404) is opened again on the next
 * request, with the same capabilities, log level and subscriptions.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CallToolRequestSchema,
  CallToolResultSchema,
  CompleteRequestSchema,
  CompleteResultSchema,
  CreateMessageRequestSchema,
  CreateMessageResultSchema,
  CreateMessageResultWithToolsSchema,
  ElicitRequestSchema,
  ElicitResultSchema,
  EmptyResultSchema,
  GetPromptRequestSchema,
  GetPromptResultSchema,
  ListPromptsRequestSchema,
  ListPromptsResultSchema,
  ListResourcesRequestSchema,
  ListResourcesResultSchema,
  ListResourceTemplatesRequestSchema,
  ListResourceTemplatesResultSchema,
  ListRootsRequestSchema,
  ListRootsResultSchema,
  ListToolsRequestSchema,
  ListToolsResultSchema,
  LoggingMessageNotificationSchema,
  PromptListChangedNotificationSchema,
  ReadResourceRequestSchema,
  ReadResourceResultSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  RootsListChangedNotificationSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  ToolListChangedNotificationSchema,
  UnsubscribeRequestSchema,
  type ClientCapabilities,
  type LoggingLevel,
  type Progress,
  type ServerCapabilities,
  type ServerNotification,
} from '@modelcontextprotocol/sdk/types.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Logger } from '../../log.js';

/** Options of {@link startMcpProxy}. */
export interface McpProxyOptions {
  /** The upstream Streamable HTTP endpoint. */
  endpoint: URL;
  /** Headers of every upstream request (e.g. the operator key as a bearer). */
  headers?: Record<string, string>;
  /** The fetch of the upstream transport (bounds, URL checks). */
  fetch?: FetchLike;
  /** The downstream side (an IDE's stdio). */
  downstream: Transport;
  /** Name and version the proxy announces downstream and upstream. */
  info: { name: string; version: string };
  /** Instructions announced downstream when the endpoint gives none. */
  instructions?: string;
  /** Time limit of a proxied `tools/call`; progress resets it (default 120 s). */
  callTimeoutMs?: number;
  logger?: Logger;
}

/** A running proxy: `done` settles when either side closes. */
export interface McpProxy {
  readonly done: Promise<void>;
  close(): Promise<void>;
}

/**
 * Mesh tools are tasks dispatched to agents, which may take a while (task TTL plus retries), so a
 * proxied call waits longer than a plain MCP request; progress notifications reset the clock.
 */
export const MCP_PROXY_CALL_TIMEOUT_MS = 120_000;

/** The capabilities the proxy announces downstream: the endpoint's, minus what it cannot relay. */
function proxiedCapabilities(upstream: ServerCapabilities | undefined): ServerCapabilities {
  const caps = upstream ?? {};
  return {
    ...(caps.tools ? { tools: caps.tools } : {}),
    ...(caps.resources ? { resources: caps.resources } : {}),
    ...(caps.prompts ? { prompts: caps.prompts } : {}),
    ...(caps.completions ? { completions: caps.completions } : {}),
    ...(caps.logging ? { logging: caps.logging } : {}),
  };
}

/** What the upstream session declares: the downstream client's sampling, elicitation and roots. */
function relayedCapabilities(downstream: ClientCapabilities | undefined): ClientCapabilities {
  return {
    ...(downstream?.sampling ? { sampling: downstream.sampling } : {}),
    ...(downstream?.elicitation ? { elicitation: downstream.elicitation } : {}),
    ...(downstream?.roots ? { roots: downstream.roots } : {}),
  };
}

/** True when the SDK client's error is the endpoint's 404 for a session it no longer knows. */
function sessionGone(err: unknown): boolean {
  return err instanceof StreamableHTTPError && err.code === 404;
}

/**
 * Connects upstream (rejecting with the SDK's error when that fails), then serves `downstream`
 * until either side closes.
 */
export async function startMcpProxy(options: McpProxyOptions): Promise<McpProxy> {
  const log = options.logger;
  let closing = false;
  let level: LoggingLevel | undefined;
  const subscribed = new Set<string>();
  // The downstream server is built once the endpoint's capabilities are known (after the first
  // upstream session connected); upstream handlers reach it through this holder.
  const holder: { server?: Server } = {};

  /** One upstream session declaring `capabilities`, wired to the downstream server. */
  const open = async (capabilities: ClientCapabilities): Promise<Client> => {
    const client = new Client(options.info, { capabilities });
    wireUpstream(client, capabilities);
    await client.connect(
      new StreamableHTTPClientTransport(options.endpoint, {
        ...(options.fetch ? { fetch: options.fetch } : {}),
        requestInit: { headers: options.headers ?? {} },
      }),
    );
    // Errors after connecting: closing aborts the open SSE stream, which the SDK reports as one.
    client.onerror = (err) => {
      if (!closing) log?.warn({ err: err.message }, 'upstream MCP connection error');
    };
    return client;
  };

  /** Relays what the upstream session sends (notifications, requests) to the downstream client. */
  const wireUpstream = (client: Client, capabilities: ClientCapabilities): void => {
    const down = () => holder.server!;
    const relay = (notification: Parameters<Server['notification']>[0]) =>
      void down()
        .notification(notification)
        .catch((err: Error) => log?.debug({ err: err.message }, 'notification not relayed'));
    client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => relay(n));
    client.setNotificationHandler(ResourceListChangedNotificationSchema, (n) => relay(n));
    client.setNotificationHandler(PromptListChangedNotificationSchema, (n) => relay(n));
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => relay(n));
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => relay(n));
    // The SDK client refuses a handler for a capability it does not declare.
    if (capabilities.sampling)
      client.setRequestHandler(CreateMessageRequestSchema, (request, extra) => {
        const withTools = request.params.tools !== undefined || request.params.toolChoice !== undefined;
        return down().request(
          { method: 'sampling/createMessage', params: request.params },
          withTools ? CreateMessageResultWithToolsSchema : CreateMessageResultSchema,
          { signal: extra.signal },
        );
      });
    if (capabilities.elicitation)
      client.setRequestHandler(ElicitRequestSchema, (request, extra) =>
        down().request({ method: 'elicitation/create', params: request.params }, ElicitResultSchema, {
          signal: extra.signal,
        }),
      );
    if (capabilities.roots)
      client.setRequestHandler(ListRootsRequestSchema, (request, extra) =>
        down().request(
          { method: 'roots/list', ...(request.params ? { params: request.params } : {}) },
          ListRootsResultSchema,
          { signal: extra.signal },
        ),
      );
  };

  const first = await open({});
  const upstreamCaps = first.getServerCapabilities();
  const capabilities = proxiedCapabilities(upstreamCaps);
  const instructions = first.getInstructions() ?? options.instructions;
  const downstream = new Server(options.info, {
    capabilities,
    ...(instructions ? { instructions } : {}),
  });
  holder.server = downstream;

  /** The upstream session in use, and the capabilities it declares. */
  let current: { client: Client; capabilities: ClientCapabilities } = { client: first, capabilities: {} };
  let chosen: Promise<Client> | undefined;
  let reopening: Promise<Client> | undefined;

  /** Ends an upstream session politely (DELETE), then closes its client. */
  const end = async (client: Client): Promise<void> => {
    const transport = client.transport as StreamableHTTPClientTransport | undefined;
    await transport?.terminateSession().catch(() => undefined);
    await client.close().catch(() => undefined);
  };

  /**
   * The upstream session that declares what the downstream client declared: the first one when it
   * declared nothing to relay, else a new one (the first is ended).
   */
  const upstream = async (): Promise<Client> => {
    chosen ??= (async () => {
      const wanted = relayedCapabilities(downstream.getClientCapabilities());
      if (Object.keys(wanted).length === 0) return first;
      const client = await open(wanted);
      current = { client, capabilities: wanted };
      watchClose(client);
      void end(first);
      log?.debug(
        { capabilities: Object.keys(wanted) },
        'upstream session reopened with the client capabilities',
      );
      return client;
    })();
    await chosen;
    return reopening ?? current.client;
  };

  /** Opens the upstream session again after the endpoint forgot it, restoring level and subscriptions. */
  const reopen = (gone: Client): Promise<Client> => {
    if (current.client !== gone) return Promise.resolve(current.client);
    reopening ??= (async () => {
      log?.warn('the upstream MCP session ended (HTTP 404); opening a new one');
      const client = await open(current.capabilities);
      const old = current.client;
      current = { client, capabilities: current.capabilities };
      watchClose(client);
      void old.close().catch(() => undefined);
      if (level) await client.setLoggingLevel(level).catch(() => undefined);
      for (const uri of subscribed) await client.subscribeResource({ uri }).catch(() => undefined);
      return client;
    })().finally(() => {
      reopening = undefined;
    });
    return reopening;
  };

  /** Sends one request upstream; a session the endpoint forgot is reopened and the request sent again. */
  const send = async <T>(run: (client: Client) => Promise<T>): Promise<T> => {
    const client = await upstream();
    try {
      return await run(client);
    } catch (err) {
      if (!sessionGone(err)) throw err;
      return run(await reopen(client));
    }
  };

  const forward = <R>(
    method: string,
    params: Record<string, unknown> | undefined,
    schema: Parameters<Client['request']>[1],
    extra: { signal: AbortSignal; sendNotification: (n: ServerNotification) => Promise<void> },
    timeout?: number,
  ): Promise<R> => {
    // The downstream progress token means nothing upstream: the SDK sends its own when
    // `onprogress` is set, and progress coming back is relabelled with the downstream token.
    const meta = params?._meta as { progressToken?: string | number } | undefined;
    const token = meta?.progressToken;
    const opts: RequestOptions = {
      signal: extra.signal,
      ...(timeout !== undefined ? { timeout } : {}),
      ...(token !== undefined
        ? {
            resetTimeoutOnProgress: true,
            onprogress: (progress: Progress) =>
              void extra
                .sendNotification({
                  method: 'notifications/progress',
                  params: { ...progress, progressToken: token },
                })
                .catch(() => undefined),
          }
        : {}),
    };
    return send(
      (client) =>
        client.request({ method, ...(params ? { params } : {}) } as never, schema, opts) as Promise<R>,
    );
  };

  const callTimeout = options.callTimeoutMs ?? MCP_PROXY_CALL_TIMEOUT_MS;
  if (capabilities.tools) {
    downstream.setRequestHandler(ListToolsRequestSchema, (req, extra) =>
      forward('tools/list', req.params, ListToolsResultSchema, extra),
    );
    downstream.setRequestHandler(CallToolRequestSchema, (req, extra) =>
      forward('tools/call', req.params, CallToolResultSchema, extra, callTimeout),
    );
  }
  if (capabilities.resources) {
    downstream.setRequestHandler(ListResourcesRequestSchema, (req, extra) =>
      forward('resources/list', req.params, ListResourcesResultSchema, extra),
    );
    downstream.setRequestHandler(ListResourceTemplatesRequestSchema, (req, extra) =>
      forward('resources/templates/list', req.params, ListResourceTemplatesResultSchema, extra),
    );
    downstream.setRequestHandler(ReadResourceRequestSchema, (req, extra) =>
      forward('resources/read', req.params, ReadResourceResultSchema, extra),
    );
    if (capabilities.resources.subscribe) {
      downstream.setRequestHandler(SubscribeRequestSchema, async (req, extra) => {
        const result = await forward('resources/subscribe', req.params, EmptyResultSchema, extra);
        subscribed.add(req.params.uri);
        return result as Record<string, never>;
      });
      downstream.setRequestHandler(UnsubscribeRequestSchema, (req, extra) => {
        subscribed.delete(req.params.uri);
        return forward('resources/unsubscribe', req.params, EmptyResultSchema, extra);
      });
    }
  }
  if (capabilities.prompts) {
    downstream.setRequestHandler(ListPromptsRequestSchema, (req, extra) =>
      forward('prompts/list', req.params, ListPromptsResultSchema, extra),
    );
    downstream.setRequestHandler(GetPromptRequestSchema, (req, extra) =>
      forward('prompts/get', req.params, GetPromptResultSchema, extra),
    );
  }
  if (capabilities.completions)
    downstream.setRequestHandler(CompleteRequestSchema, (req, extra) =>
      forward('completion/complete', req.params, CompleteResultSchema, extra),
    );
  if (capabilities.logging)
    downstream.setRequestHandler(SetLevelRequestSchema, async (req, extra) => {
      level = req.params.level;
      return forward('logging/setLevel', req.params, EmptyResultSchema, extra);
    });
  downstream.setNotificationHandler(RootsListChangedNotificationSchema, () => {
    if (current.capabilities.roots?.listChanged)
      void current.client.sendRootsListChanged().catch(() => undefined);
  });
  // Once the downstream client said what it can answer, the upstream session is settled before
  // its first request needs it.
  downstream.oninitialized = () => {
    upstream().catch((err: Error) =>
      log?.warn({ err: err.message }, 'could not reopen the upstream session'),
    );
  };

  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  const close = async (): Promise<void> => {
    if (closing) return done;
    closing = true;
    await end(current.client);
    if (current.client !== first) await first.close().catch(() => undefined);
    await downstream.close().catch(() => undefined);
    resolveDone();
  };
  /** An upstream session closing on its own (not replaced, not by us) ends the proxy. */
  const watchClose = (client: Client): void => {
    client.onclose = () => {
      if (closing || current.client !== client) return;
      log?.warn('upstream MCP connection closed; stopping');
      void close();
    };
  };
  watchClose(first);
  downstream.onclose = () => void close();
  await downstream.connect(options.downstream);
  return { done, close };
}
