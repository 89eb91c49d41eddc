/**
 * The contract between the DMZ watcher pool and its threads: what a thread receives in
 * `workerData` and the one message it may post back. Kept apart from the thread entry so the pool
 * can import the types without loading the thread body.
 */
import type { RawAdvertisement } from '../discovery/advertisement.js';
import type { WatcherSummary } from './watcherSummary.js';

/** Marks a watcher thread's workerData, so the entry never acts inside some other kind of thread. */
export const THREAD_INPUT_KIND = 'amf.watcher.input';

/** Marks the message that hands a thread its next advertisement. */
export const THREAD_AD_KIND = 'amf.watcher.advertisement';

/**
 * What a watcher thread is started with: the LLM settings and its limits, nothing else. The thread
 * is started ahead of need (standby, so its start-up is off the admission path) and then receives
 * {@link WatcherThreadAd}s one at a time, each judged in a fresh `vm` context, until the pool
 * recycles it.
 */
export interface WatcherThreadInput {
  kind: typeof THREAD_INPUT_KIND;
  /**
   * Milliseconds the LLM call may take at most, whatever AMF_WATCHER_LLM_TIMEOUT_MS says: the pool
   * terminates the thread at its own deadline, and a late LLM must fall back to the rules before
   * that rather than turn a verdict into WATCHER_TIMEOUT.
   */
  llmBudgetMs: number;
  /**
   * The only environment the thread sees for LLM scoring (the thread runs with an empty
   * `process.env`); see `pickLlmEnv`.
   */
  llmEnv: Record<string, string>;
  /** The `vm` timeout of the rules in one advertisement's context. */
  rulesTimeoutMs: number;
  /** Heap in use after a judgement above which the thread asks to be recycled. */
  recycleHeapBytes: number;
  /** The rules script run in each advertisement's context, linked once by the pool (rulesScript.ts). */
  rulesSource: string;
}

/** The message a thread receives for each advertisement it judges. */
export interface WatcherThreadAd {
  kind: typeof THREAD_AD_KIND;
  ad: RawAdvertisement;
}

/**
 * Marks the message a thread posts once, when it has loaded and warmed up: from then on the pool
 * hands it advertisements (none is bound to a thread still starting, so a busy thread that frees up
 * first takes it).
 */
export const THREAD_READY_KIND = 'amf.watcher.ready';

/** Marks a thread's reply with a verdict, so a stray message is not mistaken for one. */
export const THREAD_REPLY_KIND = 'amf.watcher.summary';

/** What a watcher thread posts for an advertisement it judged. */
export interface WatcherThreadReply {
  kind: typeof THREAD_REPLY_KIND;
  /**
   * How many advertisements the rules' context has judged, this one included. Always 1 for a fresh
   * context; the pool refuses anything else, so a reused context cannot go unnoticed.
   */
  judged: number;
  summary: WatcherSummary;
  /** The thread's heap passed `recycleHeapBytes`: the pool recycles it now. */
  retire: boolean;
}

/** Marks a thread's reply that it has no verdict for an advertisement. */
export const THREAD_FAILURE_KIND = 'amf.watcher.failure';

/**
 * What a watcher thread posts when the rules gave no verdict: they ran past their `vm` timeout
 * (`timeout`) or failed (`failed`). The pool rejects the judgement and recycles the thread.
 */
export interface WatcherThreadFailure {
  kind: typeof THREAD_FAILURE_KIND;
  raw_id: string;
  reason: 'timeout' | 'failed';
  /** Says what went wrong without quoting the advertisement. */
  message: string;
}
