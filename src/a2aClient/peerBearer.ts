/**
 * The coordinator's bearer on its A2A calls to an agent under SPIFFE (issue 12, as on its MCP calls):
 * a JWT-SVID whose audience is the agent's SPIFFE ID, fetched per request (the identity provider
 * caches it until half its lifetime). The audience comes from the agent's card (`x-amf.agent_id`), so
 * it is first proven: the agent must answer a fresh SVID challenge for that id (identity/svidProof.ts)
 * before any call gets a token — a card that names another agent's id gets no token to replay there.
 * An agent whose card names no SPIFFE ID (not an AMF agent) is called without a bearer.
 */
import { AmfError } from '../errors.js';
import type { IdentityProvider } from '../identity/identityProvider.js';
import { isSpiffeId } from '../identity/spiffeId.js';
import { requestSvidProof } from '../identity/svidProof.js';
import type { FetchedCard } from './agentCard.js';

/** Headers for one call (a fresh or cached JWT-SVID each time). */
export type CallHeaders = () => Promise<Record<string, string>>;

/**
 * The bearer for an agent's calls, once it proved the SPIFFE ID its card names; undefined when
 * SPIFFE is off here or the card names none. Throws UNAUTHORIZED when the proof fails.
 */
export async function provenPeerBearer(
  identity: IdentityProvider | undefined,
  card: FetchedCard,
  name: string,
): Promise<CallHeaders | undefined> {
  if (identity?.mode !== 'spiffe') return undefined;
  const spiffeId = card.amfAgentId;
  if (spiffeId === undefined || !isSpiffeId(spiffeId)) return undefined;
  const cardUrl = card.cardUrl;
  const proof = await requestSvidProof({ identity, agentId: spiffeId, endpoint: new URL(cardUrl).origin });
  if (!proof.verified)
    throw new AmfError(
      'UNAUTHORIZED',
      `A2A agent "${name}" did not prove the SPIFFE ID its card names (${spiffeId}): ${proof.reason}: ${proof.message}`,
      { reason: proof.reason, spiffe_id: spiffeId },
    );
  return async () => ({ authorization: `Bearer ${await identity.jwtSvid([spiffeId])}` });
}
