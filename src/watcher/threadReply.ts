/**
 * The check of a watcher thread's reply. The thread handled hostile input, so what it sends back is
 * checked like any other input, and the summary is rebuilt from its known fields only.
 */
import { THREAD_REPLY_KIND } from './threadProtocol.js';
import type { WatcherSummary } from './watcherSummary.js';

const SCORERS = new Set(['rules', 'llm']);

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

/**
 * Checks a thread's reply and rebuilds the summary from its known fields only. The thread handled
 * hostile input, so its output is checked like any other input before it leaves the pool.
 */
export function checkThreadReply(reply: unknown, rawId: string): WatcherSummary | string {
  if (typeof reply !== 'object' || reply === null) return 'reply is not an object';
  const r = reply as { kind?: unknown; judged?: unknown; summary?: unknown };
  if (r.kind !== THREAD_REPLY_KIND) return 'reply has the wrong kind';
  if (r.judged !== 1)
    return `context judged ${String(r.judged)} advertisements; each advertisement gets a fresh context`;
  const s = r.summary as Record<string, unknown> | null;
  if (typeof s !== 'object' || s === null) return 'reply has no summary';
  if (s.raw_id !== rawId) return 'summary is for another advertisement';
  const score = s.risk_score;
  if (typeof score !== 'number' || !Number.isFinite(score) || score < 0 || score > 1)
    return 'risk_score is not a number in [0, 1]';
  for (const key of [
    'original_agent_id',
    'summary',
    'risk_reason',
    'endpoint',
    'trust_domain',
    'watcher_id',
    'processed_at',
  ]) {
    if (typeof s[key] !== 'string') return `${key} is not a string`;
  }
  if ((s.summary as string).length > 100) return 'summary is longer than 100 characters';
  if (!isStringArray(s.extracted_capabilities) || !isStringArray(s.protocols_supported))
    return 'capabilities/protocols are not string arrays';
  if (s.card_url !== null && typeof s.card_url !== 'string') return 'card_url is not a string or null';
  if (s.approved !== false) return 'a watcher may not approve';
  if (typeof s.scorer !== 'string' || !SCORERS.has(s.scorer)) return 'scorer is not rules or llm';
  return {
    raw_id: rawId,
    original_agent_id: s.original_agent_id as string,
    summary: s.summary as string,
    risk_score: score,
    risk_reason: s.risk_reason as string,
    extracted_capabilities: [...s.extracted_capabilities],
    card_url: s.card_url,
    endpoint: s.endpoint as string,
    protocols_supported: [...s.protocols_supported],
    trust_domain: s.trust_domain as string,
    approved: false,
    watcher_id: s.watcher_id as string,
    processed_at: s.processed_at as string,
    scorer: s.scorer as WatcherSummary['scorer'],
  };
}
