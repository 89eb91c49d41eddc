/**
 * Assembles the HTTP interfaces of one AFM agent (webchat, webhook with its WebSub subscription, and
 * `GET /` agent info) onto a Router, which is either the agent's own server (`amf run --no-mesh`) or
 * the mesh worker's server. The console chat is separate: it needs a terminal, not a router.
 */
import type { Router } from '../../http/httpKit.js';
import { AmfError } from '../../errors.js';
import { sendJson } from '../../http/httpKit.js';
import type { Logger } from '../../log.js';
import type { AfmDefinition, AfmInterface, AfmWebChatInterface, AfmWebhookInterface } from '../types.js';
import { compileWebhookTemplate } from '../webhookTemplate.js';
import type { AgentResponder } from './responder.js';
import { compileSignature, type CompiledSignature } from './signature.js';
import { SessionStore, type SessionStoreOptions } from './sessionStore.js';
import { addWebchatRoutes } from './webchat.js';
import { addWebhookRoutes } from './webhook.js';
import { authenticationHeaders, WebSubSubscription, type WebSubOptions } from './websub.js';

export interface AgentInterfacesOptions {
  definition: AfmDefinition;
  responder: AgentResponder;
  /** The bound base URL (known after listen): WebSub callbacks default to it + the webhook path. */
  baseUrl: () => string;
  log?: Logger;
  maxBodyBytes?: number;
  /** WebSub tuning (tests shorten the retry delay). */
  websub?: Pick<
    WebSubOptions,
    'attempts' | 'retryDelayMs' | 'leaseSeconds' | 'requestTimeoutMs' | 'unsubscribeWaitMs'
  >;
  sessions?: Pick<SessionStoreOptions, 'maxSessions' | 'idleMs' | 'maxQueuedTurns' | 'maxActiveTurns'>;
  /** Extra fields for `GET /` (mesh identity). */
  info?: () => Record<string, unknown>;
}

/** The HTTP side of an agent, ready to add to a router. */
export interface AgentInterfaces {
  readonly webchat?: AfmWebChatInterface;
  readonly webhook?: AfmWebhookInterface;
  readonly websub?: WebSubSubscription;
  readonly sessions: SessionStore;
  /** The signature a mesh task, MCP call or console turn is checked against. */
  readonly chatSignature: CompiledSignature;
  /** True when there is something to serve over HTTP. */
  readonly hasHttp: boolean;
  addRoutes(router: Router, options?: { agentInfo?: boolean }): void;
  /** Starts background work (the WebSub subscription); call after the server listens. */
  start(): void;
  /** Unsubscribes from the hub; call before the server closes (the hub verifies the unsubscription). */
  close(): Promise<void>;
}

/** Paths the worker's server (and the agent's own) already serves: an interface cannot take them. */
const RESERVED_PATHS = ['/', '/health', '/mcp', '/a2a', '/tasks/send'];
const RESERVED_PREFIXES = ['/.well-known/', '/a2a/', '/mcp/', '/api/amp/'];

/** Refuses interface paths that would shadow a built-in route or each other. */
function checkPaths(def: AfmDefinition, webchat?: AfmWebChatInterface, webhook?: AfmWebhookInterface): void {
  const taken = new Map<string, string>();
  const claim = (path: string, owner: string) => {
    if (RESERVED_PATHS.includes(path) || RESERVED_PREFIXES.some((p) => path.startsWith(p)))
      throw new AmfError(
        'INVALID_REQUEST',
        `${def.source.path}: ${owner} path "${path}" is reserved (${[...RESERVED_PATHS, ...RESERVED_PREFIXES.map((p) => `${p}…`)].join(', ')})`,
      );
    const other = taken.get(path);
    if (other)
      throw new AmfError(
        'INVALID_REQUEST',
        `${def.source.path}: ${owner} path "${path}" is also the ${other} path`,
      );
    taken.set(path, owner);
  };
  if (webchat) {
    claim(webchat.exposure.http.path, 'webchat');
    claim(`${webchat.exposure.http.path}/ui`, 'webchat page');
  }
  if (webhook) claim(webhook.exposure.http.path, 'webhook');
}

function find<T extends AfmInterface['type']>(
  def: AfmDefinition,
  type: T,
): Extract<AfmInterface, { type: T }> | undefined {
  return def.interfaces.find((i): i is Extract<AfmInterface, { type: T }> => i.type === type);
}

/** Builds the interfaces of `definition` (templates and signatures are compiled here, once). */
export function createAgentInterfaces(opts: AgentInterfacesOptions): AgentInterfaces {
  const def = opts.definition;
  const webchat = find(def, 'webchat');
  const webhook = find(def, 'webhook');
  const consolechat = find(def, 'consolechat');
  checkPaths(def, webchat, webhook);
  const sessions = new SessionStore({
    ...opts.sessions,
    onEvict: (key) => opts.responder.endSession?.(key),
  });
  const chatSignature = compileSignature((webchat ?? consolechat)?.signature);
  const sub = webhook?.subscription;
  const websub =
    webhook && sub && sub.protocol === 'websub'
      ? new WebSubSubscription({
          ...(sub.hub ? { hub: sub.hub } : {}),
          ...(sub.topic ? { topic: sub.topic } : {}),
          ...(sub.secret ? { secret: sub.secret } : {}),
          callback: sub.callback ?? (() => `${opts.baseUrl()}${webhook.exposure.http.path}`),
          headers: authenticationHeaders(sub.authentication),
          ...(opts.log ? { log: opts.log } : {}),
          ...opts.websub,
        })
      : undefined;
  const agentInfo = () => ({
    name: def.name,
    description: def.description,
    version: def.version,
    ...(def.authors.length ? { authors: def.authors } : {}),
    ...(def.provider ? { provider: def.provider } : {}),
    ...(def.icon_url ? { icon_url: def.icon_url } : {}),
    interfaces: {
      ...(webchat
        ? {
            webchat: {
              path: webchat.exposure.http.path,
              ui: `${webchat.exposure.http.path}/ui`,
              signature: { input: webchat.signature.input, output: webchat.signature.output },
            },
          }
        : {}),
      ...(webhook
        ? {
            webhook: {
              path: webhook.exposure.http.path,
              signed: webhook.subscription?.secret !== undefined,
              ...(websub ? { websub: websub.state } : {}),
            },
          }
        : {}),
      ...(consolechat ? { consolechat: {} } : {}),
    },
    ...(opts.info?.() ?? {}),
  });
  let webhookRoutes: { stop(): void } | undefined;
  return {
    ...(webchat ? { webchat } : {}),
    ...(webhook ? { webhook } : {}),
    ...(websub ? { websub } : {}),
    sessions,
    chatSignature,
    hasHttp: webchat !== undefined || webhook !== undefined,
    addRoutes(router, options = {}) {
      if (options.agentInfo !== false) router.on('GET', '/', (_req, res) => sendJson(res, 200, agentInfo()));
      if (webchat)
        addWebchatRoutes(router, {
          path: webchat.exposure.http.path,
          signature: compileSignature(webchat.signature),
          responder: opts.responder,
          sessions,
          agent: { name: def.name, description: def.description, version: def.version },
          ...(opts.maxBodyBytes ? { maxBodyBytes: opts.maxBodyBytes } : {}),
          ...(opts.log ? { log: opts.log } : {}),
        });
      if (webhook)
        webhookRoutes = addWebhookRoutes(router, {
          path: webhook.exposure.http.path,
          responder: opts.responder,
          signature: compileSignature(webhook.signature),
          ...(webhook.prompt !== undefined ? { renderPrompt: compileWebhookTemplate(webhook.prompt) } : {}),
          ...(webhook.subscription?.secret !== undefined ? { secret: webhook.subscription.secret } : {}),
          ...(websub ? { websub } : {}),
          ...(opts.maxBodyBytes ? { maxBodyBytes: opts.maxBodyBytes } : {}),
          ...(opts.log ? { log: opts.log } : {}),
        });
    },
    start() {
      websub?.start();
    },
    async close() {
      webhookRoutes?.stop();
      await websub?.close();
    },
  };
}
