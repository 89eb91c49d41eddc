/**
 * Entry of one DMZ watcher thread (node:worker_threads). It is started for exactly one
 * advertisement — ahead of need, so it waits on standby with its modules loaded until the pool
 * hands it the advertisement in one message — judges it, posts exactly one WatcherSummary and is
 * terminated by the pool.
 * It holds nothing worth stealing: no NATS connection, no storage, an empty `process.env`, only the
 * advertisement and the LLM settings it was handed — and it is gone once it has answered.
 *
 * Runs from the compiled `dist/watcher/watcherThread.js`; see watcherPool.ts for why.
 */
import { randomUUID } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { scoreWithLlm } from './llmScorer.js';
import { reportedFields, sanitizeText, scoreByRules, summaryText, truncateText } from './riskRules.js';
import type { RawAdvertisement } from '../discovery/advertisement.js';
import type { WatcherSummary } from './watcherSummary.js';
import {
  THREAD_AD_KIND,
  THREAD_INPUT_KIND,
  THREAD_REPLY_KIND,
  type WatcherThreadAd,
  type WatcherThreadInput,
  type WatcherThreadReply,
} from './threadProtocol.js';

// Module-level on purpose: if a thread were ever reused, this would reach 2 and the pool, which
// checks it, would refuse the verdict.
let judged = 0;

/** Judges one advertisement: rules first, then the LLM (if configured), which can only raise the score. */
export async function judgeAdvertisement(
  ad: RawAdvertisement,
  input: WatcherThreadInput,
): Promise<WatcherSummary> {
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

async function main(port: NonNullable<typeof parentPort>, message: unknown): Promise<void> {
  judged += 1;
  const m = message as Partial<WatcherThreadAd> | null;
  if (m?.kind !== THREAD_AD_KIND || typeof m.ad !== 'object' || m.ad === null)
    throw new Error('watcher thread: the first message is not an advertisement');
  const summary = await judgeAdvertisement(m.ad, workerData as WatcherThreadInput);
  const reply: WatcherThreadReply = { kind: THREAD_REPLY_KIND, judged, summary };
  port.postMessage(reply);
  // Nothing else may happen in this thread; closing the port lets it end even before the pool
  // terminates it.
  port.close();
}

/**
 * A canned, benign advertisement scored once while the thread is on standby: V8 compiles the rules'
 * regular expressions and functions on first use (tens of ms), which would otherwise land on the
 * admission path. It is a constant of this file, never outside input, and is not counted as judged.
 */
const WARM_UP_AD: RawAdvertisement = {
  raw_id: 'warm-up',
  door: 'nats',
  source: 'watcher-warm-up',
  received_at: '1970-01-01T00:00:00.000Z',
  txt: {
    id: 'spiffe://local/worker/warm-up',
    v: '1',
    ep: 'http://127.0.0.1:9',
    tags: 'echo,text-summarize',
    proto: 'A2A/1.0,MCP/2024-11-05',
    card: 'http://127.0.0.1:9/.well-known/agent-card.json',
    td: 'local',
    note: 'Echoes text back, word for word.',
  },
  txt_bytes: 200,
};

function warmUp(): void {
  const rules = scoreByRules(WARM_UP_AD);
  reportedFields(WARM_UP_AD);
  summaryText(WARM_UP_AD.txt.id ?? '', rules.capabilities);
  truncateText(sanitizeText(WARM_UP_AD.txt.note ?? ''), 300);
  // Node loads these lazily on first use, too.
  AbortSignal.timeout(1);
  randomUUID();
  new Date().toISOString();
}

// Only inside a thread the pool started (not when imported, nor inside a test runner's thread).
if (parentPort && (workerData as Partial<WatcherThreadInput> | null)?.kind === THREAD_INPUT_KIND) {
  const port = parentPort;
  warmUp();
  // One message only (`once`): the advertisement. A rejection is unhandled, which ends the thread
  // with an 'error' event: the pool rejects with WATCHER_CRASHED.
  port.once('message', (message: unknown) => {
    void main(port, message);
  });
}
