/**
 * Checks an admitted advertisement against the agent card it points to (`card=`). Policy judged the
 * advertisement; the card is where the agent describes itself at its own endpoint, so an agent whose
 * card cannot be fetched, or whose card describes someone else, is not treated as verified: it is
 * admitted `unverified` (listed with the reason, offered nothing) until a later check succeeds.
 */
import type { RawAdvertisement } from '../discovery/advertisement.js';
import type { AgentRecord } from '../events/agentRecord.js';
import type { PolicyNotices } from '../registry/policyNotices.js';
import type { Verification } from '../registry/agentRegistry.js';
import { fetchAgentCard, type CardFetchOptions } from './fetchAgentCard.js';
import { advertisementRef } from './advertisementRef.js';

/** The fetch used for cards (tests and embedders may bound it differently). */
export type CardFetcher = (
  cardUrl: string,
  endpoint: string,
  options?: CardFetchOptions,
) => Promise<Record<string, unknown>>;

function hostOf(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined;
  try {
    return new URL(url).host;
  } catch {
    return undefined;
  }
}

/**
 * The fields in which `card` contradicts `record`: only what the card states is compared (a plain
 * A2A card without `x-amf` states no agent id), and every URL it gives must be on the advertised
 * endpoint's host and port.
 */
export function cardMismatches(card: Record<string, unknown>, record: AgentRecord): string[] {
  const problems: string[] = [];
  const xAmf = card['x-amf'];
  const amf = typeof xAmf === 'object' && xAmf !== null ? (xAmf as Record<string, unknown>) : {};
  if (amf.agent_id !== undefined && amf.agent_id !== record.agent_id)
    problems.push(`x-amf.agent_id ${JSON.stringify(amf.agent_id)} is not ${record.agent_id}`);
  if (amf.trust_domain !== undefined && amf.trust_domain !== (record.trust_domain ?? 'local'))
    problems.push(
      `x-amf.trust_domain ${JSON.stringify(amf.trust_domain)} is not ${record.trust_domain ?? 'local'}`,
    );
  if (
    amf.mcp_endpoint !== undefined &&
    record.mcp_endpoint !== undefined &&
    amf.mcp_endpoint !== record.mcp_endpoint
  )
    problems.push(`x-amf.mcp_endpoint ${JSON.stringify(amf.mcp_endpoint)} is not ${record.mcp_endpoint}`);
  const endpointHost = hostOf(record.endpoint);
  const urls: unknown[] = [];
  if (card.url !== undefined) urls.push(card.url);
  if (Array.isArray(card.supportedInterfaces))
    for (const i of card.supportedInterfaces as unknown[])
      urls.push(typeof i === 'object' && i !== null ? (i as { url?: unknown }).url : i);
  for (const url of urls) {
    if (hostOf(url) !== endpointHost) {
      problems.push(
        `interface URL ${JSON.stringify(url).slice(0, 200)} is not on ${endpointHost ?? record.endpoint}`,
      );
      break;
    }
  }
  return problems;
}

const CERTIFICATE_ERRORS = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
]);

/** True when `err` (or an error it wraps) is a TLS certificate that no trusted CA vouches for. */
function untrustedCertificate(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && depth < 6; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && CERTIFICATE_ERRORS.has(code)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** Fetches and checks the card of `record` (which has a `card_url`). Never throws. */
export async function verifyCard(
  record: AgentRecord,
  fetchCard: CardFetcher = fetchAgentCard,
): Promise<Verification> {
  let card: Record<string, unknown>;
  try {
    card = await fetchCard(record.card_url!, record.endpoint);
  } catch (err) {
    // A self-signed https agent cannot show a CA-checked card: its identity is the certificate that
    // MCP pins at admission (TOFU, docs/security.md), so the card check is skipped, not failed.
    if (record.endpoint.startsWith('https:') && untrustedCertificate(err)) return { verified: true };
    const code = (err as { code?: unknown }).code;
    return {
      verified: false,
      reason: 'card_fetch_failed',
      message: `agent card ${record.card_url} not fetched (${typeof code === 'string' ? code : 'card_fetch_failed'}): ${(err as Error).message}`,
    };
  }
  const problems = cardMismatches(card, record);
  if (problems.length > 0)
    return {
      verified: false,
      reason: 'card_mismatch',
      message: `agent card ${record.card_url} does not match the advertisement: ${problems.join('; ')}`,
    };
  return { verified: true, card };
}

/** Tells the operator an agent was admitted unverified, and why. */
export function warnUnverified(
  notices: PolicyNotices,
  raw: RawAdvertisement,
  record: AgentRecord,
  verification: Extract<Verification, { verified: false }>,
): void {
  notices.warn({
    reason: verification.reason,
    message: `${record.agent_id} admitted as unverified, offered no tasks, tools or routes: ${verification.message}`,
    agent_id: record.agent_id,
    advertisement: advertisementRef(raw, record.agent_id),
    details: { status: 'unverified', card_url: record.card_url },
  });
}
