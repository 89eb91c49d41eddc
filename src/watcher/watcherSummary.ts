/**
 * The only thing a DMZ watcher may say about an advertisement (notes/amf.md section 6). The
 * coordinator never sees the raw advertisement through the watcher: it receives this summary on
 * `amf.internal.classified` and cross-checks it against its own parse of the raw TXT.
 */
export interface WatcherSummary {
  /** Correlation id of the raw advertisement. */
  raw_id: string;
  original_agent_id: string;
  /** At most 100 characters. */
  summary: string;
  /** 0 (harmless) .. 1 (hostile). */
  risk_score: number;
  risk_reason: string;
  extracted_capabilities: string[];
  card_url: string | null;
  endpoint: string;
  protocols_supported: string[];
  trust_domain: string;
  /** Always false from a watcher; only the coordinator approves, after policy. */
  approved: false;
  watcher_id: string;
  processed_at: string;
  /** How the score was reached: deterministic rules, or an LLM (with the rules as the floor). */
  scorer: 'rules' | 'llm';
}
