/**
 * A2A agent cards of the coordinator and of workers. Each is built as a strict A2A 1.0 card (AMF's
 * mesh facts as an extension's params, src/util/amfCardBlock.ts) and served at
 * `/.well-known/agent-card.json` as the union of 1.0 and 0.3 (unionAgentCard): the 0.3 fields
 * (`url`, `preferredTransport`, `protocolVersion`, `additionalInterfaces`, `security`, flat security
 * schemes) beside the 1.0 ones, as the official Python SDK serves a card that declares 0.3
 * interfaces, so both generations of clients discover the agent at the one path 0.3 moved the card
 * to. A 1.0 reader ignores the 0.3 fields (A2A 1.0 section 5.7); a request that says
 * `A2A-Version: 1.x` gets the strict card (cardRoute.ts). `/.well-known/agent.json` adds a
 * top-level `x-amf` (legacyAgentCard).
 */
import { AgentCard as SdkAgentCard } from '@a2a-js/sdk';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import type { MeshWorker } from '../../worker/meshWorker.js';
import type { WorkerHandler } from '../../worker/handlerApi.js';
import { VERSION } from '../../version.js';
import { AMF_CARD_EXTENSION_URI, withAmfBlock } from '../../util/amfCardBlock.js';
import { isLoopbackHost } from '../../net/hostRules.js';

export { AMF_CARD_EXTENSION_URI };

/** Media types of message parts AMF agents take (others are ContentTypeNotSupportedError). */
export const INPUT_MODES = ['text/plain', 'application/json'] as const;

/** JSON-RPC binding path (both protocol versions; the `A2A-Version` header picks one). */
export const A2A_JSONRPC_PATH = '/a2a';
/** HTTP+JSON binding base (`/a2a/rest/message:send`; 0.3 clients use `/a2a/rest/v1/...`). */
export const A2A_REST_PATH = '/a2a/rest';
/**
 * AMP (Agent Message Protocol, reference/amp-SPEC.md) as an A2A extension: the same URI as
 * AMP_EXTENSION_URI in src/protocols/amp/ampMessage.ts (the spec names no URI; this one names it).
 */
export const AMP_EXTENSION_URI = 'https://github.com/laufferw/amp-protocol/blob/main/SPEC.md';

/** `protocolVersion` of a card's 0.3 fields (the 0.3 specification's own value). */
export const A2A_03_PROTOCOL_VERSION = '0.3.0';

/** Why push notifications are off: NATS is where AMF pushes task events. */
const PUSH_NOTE =
  'A2A push notifications are not offered: AMF v1 pushes task events over NATS (amf.task.* subjects) and SSE (GET /events, SendStreamingMessage, SubscribeToTask).';

export interface CardSkill {
  id: string;
  name: string;
  description: string;
  tags: string[];
}

/**
 * Who must authenticate at an agent's A2A endpoints, as its card declares it (A2A 1.0 section 4.5).
 * The edges decide it (src/http/routeAccess.ts, src/edge/worker/workerEdgeGate.ts); the card only says so.
 */
export interface CardSecurity {
  /** Which callers need a credential: none (bound to loopback), those beyond loopback, or all. */
  need: 'none' | 'beyond-loopback' | 'always';
  /** A JWT-SVID is taken too (SPIFFE is active). */
  svid: boolean;
}

interface CardCore {
  name: string;
  description: string;
  baseUrl: string;
  skills: CardSkill[];
  xAmf: Record<string, unknown>;
  security: CardSecurity;
}

/** The name of the operator-key scheme in `securitySchemes`. */
export const OPERATOR_KEY_SCHEME = 'amfOperatorKey';
/** The name of the JWT-SVID scheme in `securitySchemes` (SPIFFE). */
export const SVID_SCHEME = 'spiffeJwtSvid';

/** True when an agent served at `url` can be reached only from its own machine. */
export function isLoopbackUrl(url: string): boolean {
  try {
    return isLoopbackHost(new URL(url).hostname);
  } catch {
    return false;
  }
}

/** The 1.0 `securitySchemes` and `securityRequirements` (alternatives) for `security`; {} when none. */
function securityFields(security: CardSecurity): Record<string, unknown> {
  if (security.need === 'none') return {};
  const where =
    security.need === 'beyond-loopback'
      ? 'Needed by callers beyond loopback; a caller on the same machine needs none.'
      : 'Needed by every caller.';
  const schemes: Record<string, unknown> = {
    [OPERATOR_KEY_SCHEME]: {
      httpAuthSecurityScheme: {
        scheme: 'Bearer',
        description: `The mesh's operator key as Authorization: Bearer <key> (AMF_API_KEY, or the key generated into <data-dir>/operator.key). ${where}`,
      },
    },
  };
  const requirements: Array<Record<string, unknown>> = [{ schemes: { [OPERATOR_KEY_SCHEME]: { list: [] } } }];
  if (security.svid) {
    schemes[SVID_SCHEME] = {
      httpAuthSecurityScheme: {
        scheme: 'Bearer',
        bearerFormat: 'JWT',
        description: `A JWT-SVID from the SPIFFE Workload API whose audience is this agent's SPIFFE ID. ${where}`,
      },
    };
    requirements.push({ schemes: { [SVID_SCHEME]: { list: [] } } });
  }
  return { securitySchemes: schemes, securityRequirements: requirements };
}

function trimBase(url: string): string {
  return url.replace(/\/+$/, '');
}

/** The interfaces an AMF A2A server offers at `baseUrl`; the first is preferred. */
export function supportedInterfaces(baseUrl: string): Array<Record<string, string>> {
  const base = trimBase(baseUrl);
  return [
    { url: base + A2A_JSONRPC_PATH, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
    { url: base + A2A_REST_PATH, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
    { url: base + A2A_JSONRPC_PATH, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    { url: base + A2A_REST_PATH, protocolBinding: 'HTTP+JSON', protocolVersion: '0.3' },
  ];
}

function buildCard(core: CardCore): Record<string, unknown> {
  const base = trimBase(core.baseUrl);
  return {
    name: core.name,
    description: core.description,
    version: VERSION,
    supportedInterfaces: supportedInterfaces(base),
    capabilities: {
      streaming: true,
      pushNotifications: false,
      extendedAgentCard: false,
      extensions: [
        {
          uri: AMP_EXTENSION_URI,
          description:
            'AMP 1.0: intent-first messages (message metadata or a data part), confidence and uncertainty on artifacts',
          required: false,
          params: { amp: '1.0' },
        },
        {
          uri: AMF_CARD_EXTENSION_URI,
          description: 'AMF mesh facts: agent id, trust domain, role, and where its mesh is reached',
          required: false,
          params: {
            ...core.xAmf,
            push: { a2a_push_notifications: false, canonical: 'nats', note: PUSH_NOTE },
            a2a: { jsonrpc: base + A2A_JSONRPC_PATH, http_json: base + A2A_REST_PATH },
          },
        },
      ],
    },
    ...securityFields(core.security),
    defaultInputModes: [...INPUT_MODES],
    defaultOutputModes: ['text/plain', 'application/json'],
    skills: core.skills.map((s) => ({ ...s, inputModes: [...INPUT_MODES], outputModes: ['text/plain'] })),
  };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A 1.0 security scheme (`{httpAuthSecurityScheme: {...}}`, ...) with its 0.3 flat fields added. */
function unionSecurityScheme(scheme: unknown): unknown {
  if (!isObject(scheme)) return scheme;
  const http = scheme.httpAuthSecurityScheme;
  if (isObject(http)) return { ...scheme, type: 'http', ...http };
  const apiKey = scheme.apiKeySecurityScheme;
  if (isObject(apiKey)) {
    const { location, ...rest } = apiKey;
    return { ...scheme, type: 'apiKey', ...rest, in: location };
  }
  return scheme;
}

/**
 * The card as served at `/.well-known/agent-card.json`: the 1.0 card plus the 0.3 fields, taken from
 * its 0.3 interfaces (the first is 0.3's `url` and `preferredTransport`, all of them are
 * `additionalInterfaces`, as 0.3 recommends) and its security declarations (`security`, and each
 * scheme's flat 0.3 form beside its 1.0 one). Idempotent; a card without 0.3 interfaces is returned
 * unchanged.
 */
export function unionAgentCard(card: Record<string, unknown>): Record<string, unknown> {
  if (typeof card.url === 'string') return card;
  const interfaces = Array.isArray(card.supportedInterfaces)
    ? (card.supportedInterfaces as unknown[]).filter(isObject)
    : [];
  const legacy = interfaces.filter(
    (i) => typeof i.protocolVersion === 'string' && i.protocolVersion.startsWith('0.'),
  );
  const primary = legacy[0];
  if (!primary) return card;
  const out: Record<string, unknown> = {
    ...card,
    url: primary.url,
    preferredTransport: primary.protocolBinding,
    protocolVersion: A2A_03_PROTOCOL_VERSION,
    additionalInterfaces: legacy.map((i) => ({ url: i.url, transport: i.protocolBinding })),
  };
  if (isObject(card.securitySchemes))
    out.securitySchemes = Object.fromEntries(
      Object.entries(card.securitySchemes).map(([name, scheme]) => [name, unionSecurityScheme(scheme)]),
    );
  if (Array.isArray(card.securityRequirements))
    out.security = (card.securityRequirements as unknown[])
      .filter(isObject)
      .map((r) =>
        Object.fromEntries(
          Object.entries(isObject(r.schemes) ? r.schemes : {}).map(([name, scopes]) => [
            name,
            isObject(scopes) && Array.isArray(scopes.list) ? scopes.list : [],
          ]),
        ),
      );
  return out;
}

/**
 * The card at `/.well-known/agent.json` (the A2A 0.2 path, and AMP's manifest): the union card with
 * the mesh facts also as a top-level `x-amf`, where AMF agents before the strict 1.0 card looked.
 */
export function legacyAgentCard(card: Record<string, unknown>): Record<string, unknown> {
  return withAmfBlock(unionAgentCard(card));
}

/** What the coordinator's card says about it: the mesh's agents and its own identity facts. */
export interface CoordinatorCardSource {
  agents: AgentDirectory;
  /** The coordinator's own id (the identity its events are sent as). */
  agentId: string;
  trustDomain: string;
  /** SPIFFE is active: a credential is needed even on loopback. */
  spiffe: boolean;
  /** The NATS URL agents are told to join, read each time the card is built. */
  natsUrl: () => string;
}

/** Skill descriptions from the admitted agents' own cards (a tag's first description wins). */
function meshSkills(agents: AgentDirectory): CardSkill[] {
  const descriptions = new Map<string, string>();
  for (const agent of agents.list()) {
    if (agent.status !== 'live') continue;
    const skills = (agent.card as { skills?: unknown } | undefined)?.skills;
    if (!Array.isArray(skills)) continue;
    for (const s of skills as Array<Record<string, unknown>>) {
      if (typeof s.id === 'string' && typeof s.description === 'string' && !descriptions.has(s.id))
        descriptions.set(s.id, s.description.slice(0, 500));
    }
  }
  const tags = [...agents.liveTags().keys()].sort();
  return tags.map((tag) => ({
    id: tag,
    name: tag,
    description: descriptions.get(tag) ?? `Mesh capability ${tag}`,
    tags: [tag],
  }));
}

/** The coordinator's A2A agent card (its AMF extension has `nats_url`: coordinators publish it, docs/decisions.md #2). */
export function coordinatorAgentCard(source: CoordinatorCardSource, url: string): Record<string, unknown> {
  return buildCard({
    name: 'amf-coordinator',
    description:
      'AMF mesh coordinator: dispatches each A2A task to a mesh agent by capability (message metadata "tag", an AMP intent, the skill its words match, the agent of its conversation, or the default agent). Push notifications go over NATS, not A2A webhooks.',
    baseUrl: url,
    skills: meshSkills(source.agents),
    // Client routes are open on loopback and need the operator key (or a JWT-SVID) beyond it.
    security: {
      need: isLoopbackUrl(url) ? 'none' : 'beyond-loopback',
      svid: source.spiffe,
    },
    xAmf: {
      agent_id: source.agentId,
      trust_domain: source.trustDomain,
      protocols: ['A2A/1.0', 'A2A/0.3', 'AMP/1.0'],
      nats_url: source.natsUrl(),
      role: 'coordinator',
    },
  });
}

/** What a worker card needs from the worker's options (a subset of WorkerHttpOptions). */
export interface WorkerCardOptions {
  name: string;
  tags: string[];
  trustDomain: string;
  handler: Pick<WorkerHandler, 'description' | 'readOnly'>;
  toolAlias?: string;
  /** SPIFFE is active: every call but discovery needs a credential, loopback included. */
  spiffe?: boolean;
}

/** The A2A agent card of a worker (no `nats_url`: only coordinators publish it, docs/decisions.md #2). */
export function workerAgentCard(
  // Only its identity and advertisement: a joining worker serves its card before it is built.
  worker: Pick<MeshWorker, 'agentId' | 'agentRecord'>,
  opts: WorkerCardOptions,
  endpoint: string,
): Record<string, unknown> {
  const record = worker.agentRecord();
  return buildCard({
    name: opts.name,
    description: opts.handler.description,
    baseUrl: endpoint,
    // Open on loopback, a credential beyond it; under SPIFFE a credential from everyone (workerEdgeGate.ts).
    security: {
      need: opts.spiffe === true ? 'always' : isLoopbackUrl(endpoint) ? 'none' : 'beyond-loopback',
      svid: opts.spiffe === true,
    },
    skills: opts.tags.map((tag) => ({
      id: tag,
      name: tag,
      description: opts.handler.description,
      tags: [tag],
    })),
    xAmf: {
      agent_id: worker.agentId,
      trust_domain: opts.trustDomain,
      protocols: record.protocols_supported,
      capability_tags: opts.tags,
      role: 'worker',
      ...(record.mcp_endpoint ? { mcp_endpoint: record.mcp_endpoint } : {}),
      ...(opts.toolAlias ? { tool_alias: opts.toolAlias } : {}),
      ...(opts.handler.readOnly === true ? { read_only: true } : {}),
    },
  });
}

/** The card as the SDK's typed AgentCard (for its request handler's version and capability checks). */
export function toSdkAgentCard(card: Record<string, unknown>): SdkAgentCard {
  return SdkAgentCard.fromJSON(card);
}
