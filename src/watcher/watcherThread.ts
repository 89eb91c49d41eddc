/**
 * Entry of one DMZ watcher thread (node:worker_threads). The pool starts it ahead of need and hands
 * it advertisements one at a time; each is judged in a `vm` context created for it alone (see
 * contextJudge.ts), so no state passes from one advertisement to the next, and the thread answers
 * each with one WatcherSummary (or a failure). The pool recycles the thread after a fixed count, any
 * failure, or when this thread reports its heap past the bound.
 * It holds nothing worth stealing: no NATS connection, no storage, an empty `process.env`, only the
 * LLM settings it was handed (with an LLM configured, the pool uses each thread for one
 * advertisement only).
 *
 * Runs from the compiled `dist/watcher/watcherThread.js`; see watcherPool.ts for why.
 */
import { randomUUID } from 'node:crypto';
import { getHeapStatistics } from 'node:v8';
import vm from 'node:vm';
import { parentPort, workerData } from 'node:worker_threads';
import { scoreWithLlm } from './llmScorer.js';
import { sanitizeText, truncateText } from './advertisementText.js';
import { ContextJudgeError, judgeInFreshContext } from './contextJudge.js';
import type { RawAdvertisement } from '../discovery/advertisement.js';
import type { WatcherSummary } from './watcherSummary.js';
import {
  THREAD_AD_KIND,
  THREAD_FAILURE_KIND,
  THREAD_INPUT_KIND,
  THREAD_READY_KIND,
  THREAD_REPLY_KIND,
  type WatcherThreadAd,
  type WatcherThreadFailure,
  type WatcherThreadInput,
  type WatcherThreadReply,
} from './threadProtocol.js';
import { AmfError } from '../errors.js';

/** Judges one advertisement: the rules in a fresh context, then the LLM (if configured), which can only raise the score. */
async function judgeAdvertisement(
  script: vm.Script,
  ad: RawAdvertisement,
  input: WatcherThreadInput,
): Promise<{ judged: number; summary: WatcherSummary }> {
  const verdict = judgeInFreshContext(script, ad, input.rulesTimeoutMs);
  const rules = { score: verdict.score, reasons: verdict.reasons, capabilities: verdict.capabilities };
  const llm = await scoreWithLlm(ad, rules, {
    env: input.llmEnv,
    signal: AbortSignal.timeout(Math.max(1, input.llmBudgetMs)),
  });
  const summary: WatcherSummary = {
    raw_id: ad.raw_id,
    // Copied as read, untouched: the coordinator cross-checks these against its own parse (#9).
    ...verdict.reported,
    summary: verdict.summary,
    risk_score: llm ? llm.score : verdict.score,
    risk_reason: llm
      ? truncateText(`${verdict.ruleReason}; llm ${llm.llm_score}: ${sanitizeText(llm.reason)}`, 300)
      : verdict.ruleReason,
    extracted_capabilities: verdict.capabilities,
    approved: false,
    watcher_id: randomUUID(),
    processed_at: new Date().toISOString(),
    scorer: llm ? 'llm' : 'rules',
  };
  return { judged: verdict.judged, summary };
}

async function answer(
  port: NonNullable<typeof parentPort>,
  script: vm.Script,
  input: WatcherThreadInput,
  message: unknown,
): Promise<void> {
  const m = message as Partial<WatcherThreadAd> | null;
  if (m?.kind !== THREAD_AD_KIND || typeof m.ad !== 'object' || m.ad === null)
    throw new AmfError('INTERNAL', 'watcher thread: a message is not an advertisement');
  const ad = m.ad;
  try {
    const { judged, summary } = await judgeAdvertisement(script, ad, input);
    const retire = getHeapStatistics().used_heap_size > input.recycleHeapBytes;
    const reply: WatcherThreadReply = { kind: THREAD_REPLY_KIND, judged, summary, retire };
    port.postMessage(reply);
  } catch (err) {
    if (!(err instanceof ContextJudgeError)) throw err;
    const failure: WatcherThreadFailure = {
      kind: THREAD_FAILURE_KIND,
      raw_id: ad.raw_id,
      reason: err.reason,
      message: err.message,
    };
    port.postMessage(failure);
  }
}

/**
 * A canned, benign advertisement judged once, in a throwaway context, while the thread is on standby:
 * V8 compiles the rules' functions and regular expressions on first use (tens of ms), and the
 * compiled code is shared by later contexts. A constant of this file, never outside input.
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

function warmUp(script: vm.Script, input: WatcherThreadInput): void {
  judgeInFreshContext(script, WARM_UP_AD, Math.max(input.rulesTimeoutMs, 5000));
  truncateText(sanitizeText(WARM_UP_AD.txt.note ?? ''), 300);
  // Node loads these lazily on first use, too.
  AbortSignal.timeout(1);
  randomUUID();
  new Date().toISOString();
}

// Only inside a thread the pool started (not when imported, nor inside a test runner's thread).
if (parentPort && (workerData as Partial<WatcherThreadInput> | null)?.kind === THREAD_INPUT_KIND) {
  const port = parentPort;
  const input = workerData as WatcherThreadInput;
  // Compiled once: every context runs the same code, each with its own state.
  const script = new vm.Script(input.rulesSource, { filename: 'amf-watcher-rules.js' });
  warmUp(script, input);
  // One advertisement at a time (the pool waits for each answer). A rejection is unhandled, which
  // ends the thread with an 'error' event: the pool rejects with WATCHER_CRASHED.
  port.on('message', (message: unknown) => {
    void answer(port, script, input, message);
  });
  port.postMessage({ kind: THREAD_READY_KIND });
}
