import type { IdentityProvider } from '../identity/identityProvider.js';
import { requestSvidProof } from '../identity/svidProof.js';
import type { SummaryVerification } from '../watcher/summarySigning.js';

/**
 * What admission checks under SPIFFE: signed watcher summaries (the watcher runs in this process,
 * so its SVID is the coordinator's own), and an SVID proof from every mesh/public advertiser.
 */
export function spiffeAdmission(identity: IdentityProvider): {
  summaryVerification?: SummaryVerification;
  proveSvid?: (record: { agent_id: string; endpoint: string }) => ReturnType<typeof requestSvidProof>;
} {
  const own = identity.agentId;
  if (identity.mode !== 'spiffe' || !own) return {};
  return {
    summaryVerification: { identity, audience: own, signerAllowed: (id) => id === own },
    proveSvid: (record) =>
      requestSvidProof({ identity, agentId: record.agent_id, endpoint: record.endpoint }),
  };
}
