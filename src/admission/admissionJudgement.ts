/**
 * What the admission policy is asked about a judged advertisement: the advertised record, the
 * watcher's summary (its risk raised to 1 when it disagrees with the advertisement), and whether the
 * advertiser proved its SVID.
 */
import type { RawAdvertisement } from '../discovery/advertisement.js';
import type { AgentRecord } from '../events/agentRecord.js';
import type { AdmissionInput } from '../policy/policyEngine.js';
import type { PolicyNotices } from '../registry/policyNotices.js';
import type { SvidProof } from '../identity/svidProof.js';
import type { WatcherSummary } from '../watcher/watcherSummary.js';
import { crossVerify } from './crossVerify.js';

/** The pipeline's options the policy input is built from. */
export interface JudgementOptions {
  notices: PolicyNotices;
  trustDomain: string;
  identity: { mode: 'static' | 'spiffe'; svidVerified: boolean };
  mcpRequireTls: boolean;
  proveSvid?: (record: AgentRecord) => Promise<SvidProof>;
}

/** A classified message's summary has the fields admission reads (the rest is the watcher's). */
export function isSummary(value: unknown): value is WatcherSummary {
  if (typeof value !== 'object' || value === null) return false;
  const s = value as Record<string, unknown>;
  return (
    typeof s.raw_id === 'string' &&
    typeof s.original_agent_id === 'string' &&
    typeof s.risk_score === 'number' &&
    Number.isFinite(s.risk_score) &&
    typeof s.endpoint === 'string' &&
    typeof s.trust_domain === 'string' &&
    Array.isArray(s.protocols_supported)
  );
}

/**
 * `identity.svid_verified` for the policy: under SPIFFE a mesh/public advertiser must prove its
 * SVID (a failed proof is warned about, and the policy then denies visibility_requires_svid).
 */
export async function svidVerified(options: JudgementOptions, record: AgentRecord): Promise<boolean> {
  const { proveSvid, identity } = options;
  if (!proveSvid) return identity.svidVerified;
  if ((record.visibility ?? 'local') === 'local') return identity.svidVerified;
  const proof = await proveSvid(record);
  if (!proof.verified)
    options.notices.warn({
      reason: proof.reason,
      message: `${record.agent_id} did not prove its SVID: ${proof.message}`,
      agent_id: record.agent_id,
    });
  return proof.verified;
}

/** The policy input for `record` as the watcher summarised it; mismatches are warned about. */
export function admissionInput(
  options: JudgementOptions,
  record: AgentRecord,
  door: RawAdvertisement['door'],
  summary: WatcherSummary,
  svidVerified: boolean,
): { input: AdmissionInput; risk: number } {
  let risk = summary.risk_score;
  const mismatches = crossVerify(record, summary);
  if (mismatches.length > 0) {
    risk = 1;
    options.notices.warn({
      reason: 'watcher_summary_mismatch',
      message: `watcher summary for ${record.agent_id} disagrees with the advertisement on ${mismatches.join(', ')}`,
      agent_id: record.agent_id,
      details: { fields: mismatches, watcher_id: summary.watcher_id },
    });
  }
  const input: AdmissionInput = {
    advertisement: {
      agent_id: record.agent_id,
      endpoint: record.endpoint,
      protocols: record.protocols_supported,
      tags: record.capability_tags ?? [],
      trust_domain: record.trust_domain ?? 'local',
      visibility: record.visibility ?? 'local',
      card_url: record.card_url ?? null,
      mcp_endpoint: record.mcp_endpoint ?? null,
      door,
    },
    summary: {
      risk_score: Math.min(1, Math.max(0, risk)),
      risk_reason: String(summary.risk_reason).slice(0, 200),
      scorer: summary.scorer === 'llm' ? 'llm' : 'rules',
    },
    summary_mismatch: mismatches.length > 0,
    identity: { mode: options.identity.mode, svid_verified: svidVerified },
    coordinator_trust_domain: options.trustDomain,
    mcp_require_tls: options.mcpRequireTls,
  };
  return { input, risk };
}
