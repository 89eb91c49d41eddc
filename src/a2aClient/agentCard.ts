/**
 * Fetches and reads a remote A2A agent's card. The URL is configuration or a CLI argument: the base
 * URL of the agent (the card is looked up at `.well-known/agent-card.json`, then the legacy
 * `.well-known/agent.json`) or the card's own URL (ending in `.json`). Bounded in time (30 s) and
 * size (256 KiB), redirects refused, metadata hosts refused. Both v1.0 cards and v0.3 cards are
 * accepted; the SDK's resolver turns a v0.3 card into the v1.0 shape.
 */
import { amfCardBlock } from '../util/amfCardBlock.js';
import { DefaultAgentCardResolver } from '@a2a-js/sdk/client';
import type { AgentCard, AgentSkill } from '@a2a-js/sdk';
import { A2A_PROTOCOL_VERSION, A2A_VERSION_HEADER } from '@a2a-js/sdk';
import { AmfError } from '../errors.js';
import { checkUrl, guardedFetch, NetError } from '../net/guardedFetch.js';

/** Time allowed for fetching a card, the whole exchange included. */
export const CARD_TIMEOUT_MS = 30_000;

/** Largest card accepted (cards with many skills are a few KiB; this leaves room without risk). */
export const MAX_CARD_BYTES = 256 * 1024;

const CARD_PATHS = ['.well-known/agent-card.json', '.well-known/agent.json'] as const;

/** A fetched, checked card with the URL it came from. */
export interface FetchedCard {
  card: AgentCard;
  /** Where the card was found. */
  cardUrl: string;
  /** The protocol versions its interfaces announce (e.g. `["1.0"]`, `["0.3"]`). */
  protocolVersions: string[];
  /** The agent id an AMF agent's card states (its mesh facts, util/amfCardBlock.ts), which normalizing drops. */
  amfAgentId?: string;
}

export interface CardFetchOptions {
  timeoutMs?: number;
  maxBytes?: number;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

/** The URLs to try for `agentUrl`, in order. */
export function cardCandidates(agentUrl: URL): URL[] {
  if (agentUrl.pathname.endsWith('.json')) return [agentUrl];
  const base = new URL(agentUrl.href);
  base.search = '';
  base.hash = '';
  if (!base.pathname.endsWith('/')) base.pathname += '/';
  const out = CARD_PATHS.map((p) => new URL(p, base));
  // An agent mounted under a path usually still serves its card at the origin's well-known path.
  if (base.pathname !== '/') out.push(...CARD_PATHS.map((p) => new URL(`/${p}`, base)));
  return out;
}

const resolver = new DefaultAgentCardResolver({ legacyCompat: { enabled: true } });

/**
 * Checks the parts of a card the client relies on and returns the normalized card. Anything
 * missing is named in the error, so a user knows what the remote agent got wrong.
 */
export function readAgentCard(raw: unknown, where: string): AgentCard {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new AmfError('INVALID_REQUEST', `agent card at ${where} is not a JSON object`);
  let card: AgentCard;
  try {
    card = resolver.normalizeAgentCard(raw);
  } catch (err) {
    throw new AmfError(
      'INVALID_REQUEST',
      `agent card at ${where} does not parse: ${(err as Error).message}`,
      undefined,
      {
        cause: err,
      },
    );
  }
  if (typeof card.name !== 'string' || card.name.trim() === '')
    throw new AmfError('INVALID_REQUEST', `agent card at ${where} has no "name"`);
  const interfaces = Array.isArray(card.supportedInterfaces) ? card.supportedInterfaces : [];
  if (interfaces.length === 0)
    throw new AmfError(
      'INVALID_REQUEST',
      `agent card at ${where} lists no interface (v1.0 "supportedInterfaces" or v0.3 "url")`,
    );
  for (const i of interfaces)
    if (typeof i?.url !== 'string' || typeof i.protocolBinding !== 'string')
      throw new AmfError(
        'INVALID_REQUEST',
        `agent card at ${where}: every interface needs "url" and "protocolBinding"`,
      );
  return card;
}

/** The card's skills that have at least an id (the rest cannot be named). */
export function cardSkills(card: AgentCard): AgentSkill[] {
  const skills = Array.isArray(card.skills) ? card.skills : [];
  return skills.filter((s) => typeof s?.id === 'string' && s.id.length > 0);
}

/** Fetches the card of the agent at `agentUrl`. */
export async function fetchAgentCard(agentUrl: string, options: CardFetchOptions = {}): Promise<FetchedCard> {
  const url = checkUrl(agentUrl, { what: 'A2A agent URL' });
  const timeoutMs = options.timeoutMs ?? CARD_TIMEOUT_MS;
  const maxBytes = options.maxBytes ?? MAX_CARD_BYTES;
  // One deadline for the whole exchange, however many well-known paths are tried.
  const deadline = Date.now() + timeoutMs;
  const tried: string[] = [];
  for (const candidate of cardCandidates(url)) {
    let res: Response;
    try {
      res = await guardedFetch(
        candidate,
        {
          headers: {
            accept: 'application/json',
            [A2A_VERSION_HEADER]: A2A_PROTOCOL_VERSION,
            ...options.headers,
          },
        },
        {
          what: `agent card at ${candidate.href}`,
          redirects: 'refuse',
          timeoutMs: Math.max(1, deadline - Date.now()),
          ...(options.signal ? { signal: options.signal } : {}),
          maxBytes,
          // A card is one JSON document: an event stream gets the same whole-body cap.
          streamCap: maxBytes,
          buffer: true,
        },
      );
    } catch (err) {
      if (err instanceof NetError && err.reason === 'timeout')
        throw new AmfError('TIMEOUT', `agent card fetch from ${url.origin} took longer than ${timeoutMs} ms`);
      // Refusals (redirect, size) come as AmfErrors already.
      if (err instanceof AmfError) throw err;
      if (options.signal?.aborted) throw new AmfError('UNAVAILABLE', 'agent card fetch was cancelled');
      // fetch says only "fetch failed"; the cause says why (ECONNREFUSED, bad port, DNS).
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new AmfError(
        'UNAVAILABLE',
        `cannot reach A2A agent at ${url.origin}: ${cause?.code ?? cause?.message ?? (err as Error).message}`,
      );
    }
    if (res.status === 404 || res.status === 405) {
      await res.body?.cancel().catch(() => undefined);
      tried.push(candidate.href);
      continue;
    }
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      throw new AmfError('UNAVAILABLE', `agent card at ${candidate.href} answered HTTP ${res.status}`);
    }
    // The body was read under the cap and the timeout by the guarded fetch.
    const text = await res.text();
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      throw new AmfError('INVALID_REQUEST', `agent card at ${candidate.href} is not JSON`);
    }
    const card = readAgentCard(raw, candidate.href);
    const protocolVersions = [
      ...new Set(card.supportedInterfaces.map((i) => i.protocolVersion || A2A_PROTOCOL_VERSION)),
    ];
    const amfAgentId = amfCardBlock(raw)?.agent_id;
    return {
      card,
      cardUrl: candidate.href,
      protocolVersions,
      ...(typeof amfAgentId === 'string' ? { amfAgentId: amfAgentId.slice(0, 2048) } : {}),
    };
  }
  throw new AmfError('NOT_FOUND', `no agent card found; tried ${tried.join(', ')}`);
}
