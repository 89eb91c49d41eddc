/**
 * The admission decisions the console shows, rebuilt from what the fabric already keeps: the DMZ
 * watcher's summaries (`amf.internal.classified` in AMF_INTERNAL: agent, risk score and reason) joined
 * by raw id with the denials (`amf.policy.deny` in AMF_EVENTS: reasons and stage). A summary without
 * a denial whose agent the registry holds was admitted. Denials that never reached the watcher
 * (validation, rate) are listed on their own.
 */
import type { JetStreamManager } from '@nats-io/jetstream';
import { EVENTS_STREAM, INTERNAL_STREAM } from '../../fabric/jetstream.js';
import { SUBJECT_INTERNAL_CLASSIFIED } from '../../events/subjects.js';
import { readHistory } from '../../http/eventHistory.js';
import type { AgentDirectory } from '../../registry/agentDirectory.js';

export const ADMISSIONS_MAX_LIMIT = 500;

export interface AdmissionEntry {
  time: string;
  agent_id: string | null;
  decision: 'admitted' | 'denied' | 'pending';
  /** The watcher's score (0 harmless .. 1 hostile); null when the advertisement never reached it. */
  risk_score: number | null;
  risk_reason: string | null;
  scorer: string | null;
  reasons: string[];
  stage: string | null;
  message: string | null;
  door: string | null;
  raw_id: string | null;
  /** The agent's registry status now (live, offline, unverified), when it is known. */
  status: string | null;
}

interface Summary {
  raw_id?: string;
  original_agent_id?: string;
  risk_score?: number;
  risk_reason?: string;
  scorer?: string;
  processed_at?: string;
}

/** An `amf.policy.deny` CloudEvent: the payload sits under data.payload (next to auth_context). */
interface Denial {
  data?: { payload?: DenialPayload };
}

interface DenialPayload {
  reason?: string;
  message?: string;
  agent_id?: string;
  details?: { reasons?: unknown; stage?: unknown; door?: unknown; raw_id?: unknown };
}

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** The newest `limit` admission decisions, newest first. */
export async function recentAdmissions(
  jsm: JetStreamManager,
  registry: AgentDirectory,
  limit: number,
): Promise<AdmissionEntry[]> {
  const [summaries, denials] = await Promise.all([
    readHistory(jsm, INTERNAL_STREAM, { subject: SUBJECT_INTERNAL_CLASSIFIED, limit }),
    readHistory(jsm, EVENTS_STREAM, { subject: 'amf.policy.deny', limit }),
  ]);
  const denialByRaw = new Map<string, { time: string; denial: DenialPayload }>();
  const unmatched: Array<{ time: string; denial: DenialPayload }> = [];
  for (const entry of denials.events) {
    const denial = (entry.event as Denial | null)?.data?.payload;
    // Only advertisement denials carry a stage; task and MCP denials are not admission decisions.
    if (!denial?.details || denial.details.stage === undefined) continue;
    const rawId = str(denial.details.raw_id);
    if (rawId) denialByRaw.set(rawId, { time: entry.time, denial });
    else unmatched.push({ time: entry.time, denial });
  }
  const out: AdmissionEntry[] = [];
  for (const entry of summaries.events) {
    const s = entry.event as Summary;
    const rawId = str(s.raw_id);
    const agentId = str(s.original_agent_id);
    const denied = rawId ? denialByRaw.get(rawId) : undefined;
    if (rawId) denialByRaw.delete(rawId);
    const known = agentId ? registry.get(agentId) : undefined;
    const d = denied?.denial;
    out.push({
      time: entry.time,
      agent_id: agentId,
      decision: denied ? 'denied' : known ? 'admitted' : 'pending',
      risk_score: typeof s.risk_score === 'number' ? s.risk_score : null,
      risk_reason: str(s.risk_reason),
      scorer: str(s.scorer),
      reasons: Array.isArray(d?.details?.reasons) ? d.details.reasons.map(String) : [],
      stage: str(d?.details?.stage),
      message: str(d?.message),
      door: str(d?.details?.door),
      raw_id: rawId,
      status: known?.status ?? null,
    });
  }
  for (const { time, denial } of [...denialByRaw.values(), ...unmatched]) {
    const d = denial;
    out.push({
      time,
      agent_id: str(d.agent_id),
      decision: 'denied',
      risk_score: null,
      risk_reason: null,
      scorer: null,
      reasons: Array.isArray(d.details?.reasons) ? d.details.reasons.map(String) : [str(d.reason) ?? ''],
      stage: str(d.details?.stage),
      message: str(d.message),
      door: str(d.details?.door),
      raw_id: str(d.details?.raw_id),
      status: null,
    });
  }
  out.sort((a, b) => (a.time < b.time ? 1 : a.time > b.time ? -1 : 0));
  return out.slice(0, limit);
}
