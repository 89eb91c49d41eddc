/**
 * The options of the DMZ watcher pool (watcherPool.ts), their defaults, and where the compiled
 * thread entry is (see watcherPool.ts for why it is always the compiled one).
 */
import type { ResourceLimits } from 'node:worker_threads';

/** Memory limits of one watcher thread: ample for scoring 512-byte records, fatal for a runaway. */
export const DEFAULT_THREAD_LIMITS: ResourceLimits = {
  maxOldGenerationSizeMb: 32,
  maxYoungGenerationSizeMb: 8,
  codeRangeSizeMb: 16,
  stackSizeMb: 4,
};

/**
 * Time kept free between the end of the LLM budget and the thread deadline, for thread start-up and
 * the rules, so a slow LLM ends in a rules verdict rather than a timeout.
 */
export const LLM_DEADLINE_MARGIN_MS = 1000;

/** How long a thread beyond the standby target may stay idle before it is retired. */
export const DEFAULT_IDLE_RETIRE_MS = 30_000;
/**
 * Advertisements a thread judges (each in its own context) before it is recycled. Recycling costs a
 * thread start and warm-up, far more CPU than a judgement, so it is spread over many advertisements
 * (docs/performance.md), while the heap bound (`DEFAULT_RECYCLE_HEAP_BYTES`) still recycles a
 * thread whose heap grew early. Isolation does not change with it: every advertisement has its own
 * context, and the memory limit has always been the thread's.
 */
export const DEFAULT_RECYCLE_AFTER = 256;
/** The `vm` timeout of the rules for one advertisement (far above what the rules take). */
export const DEFAULT_RULES_TIMEOUT_MS = 1000;
/** Heap in use after a judgement above which a thread is recycled: 3/4 of the default old space. */
export const DEFAULT_RECYCLE_HEAP_BYTES = 24 * 1024 * 1024;

/** Options of {@link DmzWatcher}. */
export interface DmzWatcherOptions {
  /** Threads alive at once, judging or idle (default 4). */
  maxConcurrent?: number;
  /**
   * Threads kept started and idle, ready for an advertisement (default 2, at most `maxConcurrent`;
   * 0 starts a thread only when an advertisement finds none idle).
   */
  standby?: number;
  /** Advertisements waiting for a thread; beyond this judge() rejects at once with WATCHER_BUSY (default 256). */
  maxQueue?: number;
  /** Wall-clock limit of one judgement, from handing the advertisement to a thread (started or still
   * starting) to its answer, after which the thread is terminated (default 5000 ms). */
  timeoutMs?: number;
  /**
   * How long an advertisement may wait in the queue for a thread; past it, it is rejected with
   * WATCHER_TIMEOUT instead of judged late (default: `timeoutMs`).
   */
  maxWaitMs?: number;
  /**
   * The LLM settings handed to each thread (see `pickLlmEnv`). The thread's process.env is empty,
   * so without this the rules decide alone. With an LLM configured, `recycleAfter` is 1.
   */
  llmEnv?: Record<string, string>;
  /** Per-thread memory limits (default {@link DEFAULT_THREAD_LIMITS}). */
  resourceLimits?: ResourceLimits;
  /**
   * How long a thread may stay idle while more threads than `standby` are idle; then it is retired,
   * so the pool shrinks back after a burst (default {@link DEFAULT_IDLE_RETIRE_MS}).
   */
  idleRetireMs?: number;
  /** Advertisements one thread judges before it is recycled (default {@link DEFAULT_RECYCLE_AFTER}). */
  recycleAfter?: number;
  /** The `vm` timeout of the rules per advertisement (default {@link DEFAULT_RULES_TIMEOUT_MS}). */
  rulesTimeoutMs?: number;
  /** Heap in use after a judgement that recycles the thread (default {@link DEFAULT_RECYCLE_HEAP_BYTES}). */
  recycleHeapBytes?: number;
  /** The thread entry (tests inject fixtures); default {@link defaultThreadUrl}. */
  threadUrl?: URL;
  /**
   * An absolute path to a script run in each context instead of the linked rules: tests only (they
   * inject rules that pollute globals, loop or allocate), like `threadUrl`. Never set in production.
   */
  rulesScriptPath?: string;
}

/**
 * Where the compiled thread entry is: next to this module when it runs compiled, else in dist/
 * (when vitest imports the sources; `npm run build` produces it).
 */
export function defaultThreadUrl(): URL {
  if (import.meta.url.endsWith('.js')) return new URL('./watcherThread.js', import.meta.url);
  return new URL('../../dist/watcher/watcherThread.js', import.meta.url);
}
