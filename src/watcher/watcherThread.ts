/**
 * Entry of one DMZ watcher thread (node:worker_threads). It is started for exactly one
 * advertisement, judges it, posts exactly one WatcherSummary and is terminated by the pool.
 * It holds nothing worth stealing: no NATS connection, no storage, an empty `process.env`, only the
 * advertisement and the LLM settings it was handed — and it is gone once it has answered.
 *
 * Runs from the compiled `dist/watcher/watcherThread.js`; see watcherPool.ts for why.
 */
import { randomUUID } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { scoreWithLlm } from './llmScorer.js';
import { reportedFields, sanitizeText, scoreByRules, summaryText, truncateText } from './riskRules.js';
import type { WatcherSummary } from './watcherSummary.js';
import {
  THREAD_INPUT_KIND,
  THREAD_REPLY_KIND,
  type WatcherThreadInput,
  type WatcherThreadReply,
} from './threadProtocol.js';

// Module-level on purpose: if a thread were ever reused, this would reach 2 and the pool, which
// checks it, would refuse the verdict.
let judged = 0;

/** Judges one advertisement: rules first, then the LLM (if configured), which can only raise the score. */
export async function judgeAdvertisement(input: WatcherThreadInput): Promise<WatcherSummary> {
  const { ad } = input;
  const rules = scoreByRules(ad);
  const llm = await scoreWithLlm(ad, rules, {
    env: input.llmEnv,
    signal: AbortSignal.timeout(Math.max(1, input.llmBudgetMs)),
  });
  const ruleReason = rules.reasons.length > 0 ? rules.reasons.join(',') : 'no_findings';
  return {
    raw_id: ad.raw_id,
    // Copied as read, untouched: the coordinator cross-checks these against its own parse (#9).
    ...reportedFields(ad),
    summary: summaryText(ad.txt.id, rules.capabilities),
    risk_score: llm ? llm.score : rules.score,
    risk_reason: llm
      ? truncateText(`${ruleReason}; llm ${llm.llm_score}: ${sanitizeText(llm.reason)}`, 300)
      : ruleReason,
    extracted_capabilities: rules.capabilities,
    approved: false,
    watcher_id: randomUUID(),
    processed_at: new Date().toISOString(),
    scorer: llm ? 'llm' : 'rules',
  };
}

async function main(port: NonNullable<typeof parentPort>): Promise<void> {
  judged += 1;
  const summary = await judgeAdvertisement(workerData as WatcherThreadInput);
  const reply: WatcherThreadReply = { kind: THREAD_REPLY_KIND, judged, summary };
  port.postMessage(reply);
  // Nothing else may happen in this thread; closing the port lets it end even before the pool
  // terminates it.
  port.close();
}

// Only inside a thread the pool started (not when imported, nor inside a test runner's thread).
if (parentPort && (workerData as Partial<WatcherThreadInput> | null)?.kind === THREAD_INPUT_KIND) {
  // An exception becomes the thread's 'error' event: the pool rejects with WATCHER_CRASHED.
  await main(parentPort);
}
