/**
 * The contract between the DMZ watcher pool and its threads: what a thread receives in
 * `workerData` and the one message it may post back. Kept apart from the thread entry so the pool
 * can import the types without loading the thread body.
 */
import type { RawAdvertisement } from '../discovery/advertisement.js';
import type { WatcherSummary } from './watcherSummary.js';

/** Marks a watcher thread's workerData, so the entry never acts inside some other kind of thread. */
export const THREAD_INPUT_KIND = 'amf.watcher.input';

/** Marks the one message that hands a standby thread its advertisement. */
export const THREAD_AD_KIND = 'amf.watcher.advertisement';

/**
 * What a watcher thread is started with: the LLM settings, nothing else. The thread is started
 * ahead of need (standby, so its start-up is off the admission path) and then receives exactly one
 * {@link WatcherThreadAd}.
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
}

/** The one message a standby thread receives: the advertisement it judges. */
export interface WatcherThreadAd {
  kind: typeof THREAD_AD_KIND;
  ad: RawAdvertisement;
}

/** Marks the thread's one reply, so a stray message is not mistaken for a verdict. */
export const THREAD_REPLY_KIND = 'amf.watcher.summary';

/** The one message a watcher thread posts. */
export interface WatcherThreadReply {
  kind: typeof THREAD_REPLY_KIND;
  /**
   * How many advertisements this thread's module instance has judged, this one included. Always 1
   * for a fresh thread; the pool refuses anything else, so a reused thread cannot go unnoticed.
   */
  judged: number;
  summary: WatcherSummary;
}
