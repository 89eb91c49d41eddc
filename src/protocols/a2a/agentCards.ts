/**
 * A2A agent cards of the coordinator and of workers: a strict A2A 1.0 card at
 * `/.well-known/agent-card.json` (AMF's mesh facts as an extension's params, src/util/amfCardBlock.ts)
 * and, for A2A 0.3 readers at `/.well-known/agent.json`, the same card with the 0.3 fields and
 * a top-level `x-amf` added (legacyAgentCard).
 */
import { AgentCard as SdkAgentCard } from '@a2a-js/sdk';
import type { Coordinator } from '../../coordinator/coordinator.js';
import type { MeshWorker } from '../../worker/meshWorker.js';
import type { WorkerHandler } from '../../worker/handlerApi.js';
import { VERSION } from '../../version.js';
import { AMF_CARD_EXTENSION_URI, withAmfBlock } from '../../util/amfCardBlock.js';

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

/** Why push notifications are off: NATS is where AMF pushes task events. */
const PUSH_NOTE =
  'A2A push notifications are not offered: AMF v1 pushes task events over NATS (amf.task.* subjects) and SSE (GET /events, SendStreamingMessage, SubscribeToTask).';

export interface CardSkill {
  id: string;
  name: string;
  description: string;
  tags: string[];
}

interface CardCore {
  name: string;
  description: string;
  baseUrl: string;
  skills: CardSkill[];
  xAmf: Record<string, unknown>;
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
    defaultInputModes: [...INPUT_MODES],
    defaultOutputModes: ['text/plain', 'application/json'],
    skills: core.skills.map((s) => ({ ...s, inputModes: [...INPUT_MODES], outputModes: ['text/plain'] })),
  };
}

/**
 * The same card for A2A 0.3 readers (`/.well-known/agent.json`): the 1.0 card plus the 0.3 fields
 * (`url`, `preferredTransport`, `protocolVersion`, `additionalInterfaces`) and the mesh facts as a
 * top-level `x-amf`, where AMF agents before the strict 1.0 card looked for them.
 */
export function legacyAgentCard(card: Record<string, unknown>): Record<string, unknown> {
  const interfaces = (card.supportedInterfaces ?? []) as Array<Record<string, string>>;
  const jsonRpc = interfaces.find((i) => i.protocolBinding === 'JSONRPC')?.url;
  const rest = interfaces.find((i) => i.protocolBinding === 'HTTP+JSON')?.url;
  return {
    ...withAmfBlock(card),
    ...(jsonRpc ? { url: jsonRpc, preferredTransport: 'JSONRPC' } : {}),
    protocolVersion: '0.3.0',
    ...(rest ? { additionalInterfaces: [{ url: rest, transport: 'HTTP+JSON' }] } : {}),
  };
}

/** Skill descriptions from the admitted agents' own cards (a tag's first description wins). */
function meshSkills(coordinator: Coordinator): CardSkill[] {
  const descriptions = new Map<string, string>();
  for (const agent of coordinator.registry.list()) {
    if (agent.status !== 'live') continue;
    const skills = (agent.card as { skills?: unknown } | undefined)?.skills;
    if (!Array.isArray(skills)) continue;
    for (const s of skills as Array<Record<string, unknown>>) {
      if (typeof s.id === 'string' && typeof s.description === 'string' && !descriptions.has(s.id))
        descriptions.set(s.id, s.description.slice(0, 500));
    }
  }
  const tags = [...coordinator.registry.liveTags().keys()].sort();
  return tags.map((tag) => ({
    id: tag,
    name: tag,
    description: descriptions.get(tag) ?? `Mesh capability ${tag}`,
    tags: [tag],
  }));
}

/** The coordinator's A2A agent card (its AMF extension has `nats_url`: coordinators publish it, LOCKED #2). */
export function coordinatorAgentCard(coordinator: Coordinator, url: string): Record<string, unknown> {
  return buildCard({
    name: 'amf-coordinator',
    description:
      'AMF mesh coordinator: dispatches each A2A task to a mesh worker by capability tag (message metadata "tag", an AMP intent, or the matching skill). Push notifications go over NATS, not A2A webhooks.',
    baseUrl: url,
    skills: meshSkills(coordinator),
    xAmf: {
      agent_id: coordinator.sender.identity,
      trust_domain: coordinator.config.identity.trustDomain,
      protocols: ['A2A/1.0', 'A2A/0.3', 'AMP/1.0'],
      nats_url: coordinator.advertisedNatsUrl,
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
}

/** The A2A agent card of a worker (no `nats_url`: only coordinators publish it, LOCKED #2). */
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
