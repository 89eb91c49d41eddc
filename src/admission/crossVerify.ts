/**
 * Cross-verification (docs/decisions.md #9): the coordinator does not take the watcher's word for what an
 * advertisement says. It compares the summary with its own parse of the raw TXT; any disagreement
 * means the watcher was fooled or compromised, so the risk is floored at 1.0 and the agent denied.
 */
import type { AgentRecord } from '../events/agentRecord.js';
import type { WatcherSummary } from '../watcher/watcherSummary.js';

/** The fields that disagree (empty when the summary is faithful). */
export function crossVerify(record: AgentRecord, summary: WatcherSummary): string[] {
  const mismatches: string[] = [];
  if (summary.original_agent_id !== record.agent_id) mismatches.push('original_agent_id');
  if (summary.endpoint !== record.endpoint) mismatches.push('endpoint');
  // The watcher may list fewer protocols than advertised, never one that was not advertised.
  const advertised = new Set(record.protocols_supported);
  if (
    !Array.isArray(summary.protocols_supported) ||
    summary.protocols_supported.some((p) => !advertised.has(p))
  )
    mismatches.push('protocols_supported');
  if (summary.trust_domain !== (record.trust_domain ?? 'local')) mismatches.push('trust_domain');
  if ((summary.card_url ?? null) !== (record.card_url ?? null)) mismatches.push('card_url');
  if (summary.approved !== false) mismatches.push('approved');
  return mismatches;
}
