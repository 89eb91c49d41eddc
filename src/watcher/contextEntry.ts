/**
 * What runs inside the fresh `vm` context of one advertisement (linked into the rules script, see
 * rulesScript.ts): the rules and every field of the summary read from the advertisement. The
 * verdict leaves the context as JSON text, so no object made in it is reachable from outside.
 * Importable as an ordinary module too (it has no side effects), which the tests use to compare.
 */
import type { RawAdvertisement } from '../discovery/advertisement.js';
import { reportedFields, summaryText, type ReportedFields } from './advertisementText.js';
import { scoreByRules } from './riskRules.js';

/** What the context says about its advertisement (JSON text of this shape). */
export interface ContextVerdict {
  /**
   * Advertisements this context's copy of the rules has judged, this one included. A fresh context
   * per advertisement makes it 1; the pool refuses anything else, so a reused context cannot go
   * unnoticed.
   */
  judged: number;
  score: number;
  reasons: string[];
  capabilities: string[];
  reported: ReportedFields;
  /** The summary line (`<id> offers <tags>`). */
  summary: string;
  /** The rules' reasons joined, or `no_findings`. */
  ruleReason: string;
}

// Module-level on purpose: see ContextVerdict.judged.
let judged = 0;

/** Judges one advertisement by the rules; returns the {@link ContextVerdict} as JSON text. */
export function judgeInContext(ad: RawAdvertisement): string {
  judged += 1;
  const rules = scoreByRules(ad);
  const verdict: ContextVerdict = {
    judged,
    score: rules.score,
    reasons: rules.reasons,
    capabilities: rules.capabilities,
    reported: reportedFields(ad),
    summary: summaryText(ad.txt.id, rules.capabilities),
    ruleReason: rules.reasons.length > 0 ? rules.reasons.join(',') : 'no_findings',
  };
  return JSON.stringify(verdict);
}
