/**
 * The DMZ watcher: every advertisement is judged in a fresh worker thread of its own, limited in
 * memory and wall-clock time, and terminated as soon as it has answered. No thread ever sees a
 * second advertisement, so a thread subverted by one advertisement has nothing to leak and no later
 * advertisement to influence.
 *
 * Threads are started ahead of need: a few wait on standby with their modules loaded (nothing in
 * them yet but the LLM settings), and the next advertisement is handed to one of them in a message.
 * Starting a thread is most of the cost of a judgement (tens of ms of CPU); on standby, that cost
 * is paid between advertisements instead of on the admission path.
 *
 * Thread entry: node:worker_threads cannot run TypeScript on Node 20, so the thread always runs the
 * COMPILED entry. From dist/ that is the sibling `watcherThread.js`; when this module runs from
 * src/ (vitest imports the sources) it is `dist/watcher/watcherThread.js`, which `npm run build`
 * (and scripts/test.sh, before the tests) produces. If that file is missing the constructor throws
 * WATCHER_THREAD_MISSING saying so, rather than every judgement failing later.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker, type ResourceLimits } from 'node:worker_threads';
import type { RawAdvertisement } from '../discovery/advertisement.js';
import {
  THREAD_AD_KIND,
  THREAD_INPUT_KIND,
  type WatcherThreadAd,
  type WatcherThreadInput,
} from './threadProtocol.js';
import type { WatcherSummary } from './watcherSummary.js';
import { checkThreadReply } from './threadReply.js';
import { AmfError } from '../errors.js';

/** Stable codes of watcher failures; every one of them means "deny" to the admission pipeline. */
export type WatcherErrorCode =
  'WATCHER_BUSY' | 'WATCHER_TIMEOUT' | 'WATCHER_CRASHED' | 'WATCHER_CLOSED' | 'WATCHER_THREAD_MISSING';

/** A judgement that produced no summary. */
export class WatcherError extends AmfError {
  declare readonly code: WatcherErrorCode;

  constructor(code: WatcherErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, undefined, options);
    this.name = 'WatcherError';
  }
}

/** Memory limits of one watcher thread: ample for scoring one 512-byte record, fatal for a runaway. */
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
const LLM_DEADLINE_MARGIN_MS = 1000;

/** Options of {@link DmzWatcher}. */
export interface DmzWatcherOptions {
  /** Threads alive at once, judging or on standby (default 4). */
  maxConcurrent?: number;
  /**
   * Threads kept started and waiting for an advertisement (default 2, at most `maxConcurrent`;
   * 0 starts each thread only when its advertisement arrives).
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
   * so without this the rules decide alone.
   */
  llmEnv?: Record<string, string>;
  /** Per-thread memory limits (default {@link DEFAULT_THREAD_LIMITS}). */
  resourceLimits?: ResourceLimits;
  /** The thread entry (tests inject fixtures); default {@link defaultThreadUrl}. */
  threadUrl?: URL;
}

/**
 * Where the compiled thread entry is: next to this module when it runs compiled, else in dist/
 * (see the module comment).
 */
export function defaultThreadUrl(): URL {
  if (import.meta.url.endsWith('.js')) return new URL('./watcherThread.js', import.meta.url);
  return new URL('../../dist/watcher/watcherThread.js', import.meta.url);
}

interface Job {
  ad: RawAdvertisement;
  /** performance.now() when judge() queued it. */
  queuedAt: number;
  resolve(summary: WatcherSummary): void;
  reject(err: WatcherError): void;
}

/**
 * Judges advertisements, one fresh worker thread each, never reused. Concurrency and the waiting
 * queue are bounded so a flood of advertisements costs bounded memory and CPU; what does not fit is
 * refused at once (WATCHER_BUSY) rather than queued without end.
 */
export class DmzWatcher {
  private readonly maxConcurrent: number;
  private readonly standbyTarget: number;
  private readonly maxQueue: number;
  private readonly timeoutMs: number;
  private readonly maxWaitMs: number;
  private readonly llmEnv: Record<string, string>;
  private readonly limits: ResourceLimits;
  private readonly threadUrl: URL;
  private readonly waiting: Job[] = [];
  /** Started threads that have no advertisement yet. */
  private readonly standbyThreads: Worker[] = [];
  private readonly live = new Set<Worker>();
  private readonly exits = new Set<Promise<void>>();
  private busy = 0;
  private closed = false;

  /** Throws WATCHER_THREAD_MISSING when the compiled thread entry does not exist. */
  constructor(opts: DmzWatcherOptions = {}) {
    this.maxConcurrent = Math.max(1, opts.maxConcurrent ?? 4);
    this.standbyTarget = Math.min(this.maxConcurrent, Math.max(0, opts.standby ?? 2));
    this.maxQueue = Math.max(0, opts.maxQueue ?? 256);
    this.timeoutMs = Math.max(1, opts.timeoutMs ?? 5000);
    this.maxWaitMs = Math.max(1, opts.maxWaitMs ?? this.timeoutMs);
    this.llmEnv = { ...(opts.llmEnv ?? {}) };
    this.limits = { ...(opts.resourceLimits ?? DEFAULT_THREAD_LIMITS) };
    this.threadUrl = opts.threadUrl ?? defaultThreadUrl();
    const path = fileURLToPath(this.threadUrl);
    if (!existsSync(path)) {
      throw new WatcherError(
        'WATCHER_THREAD_MISSING',
        `DMZ watcher thread entry ${path} does not exist: worker threads run compiled JavaScript, ` +
          `so build first (npm run build / npx tsc -p tsconfig.json)`,
      );
    }
    this.pump(true);
  }

  /** Advertisements waiting for a thread. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Threads judging an advertisement now. */
  get running(): number {
    return this.busy;
  }

  /** Threads started and waiting for their advertisement. */
  get standby(): number {
    return this.standbyThreads.length;
  }

  /**
   * Judges one advertisement in a thread of its own. Rejects with a WatcherError: WATCHER_BUSY
   * (queue full, at once), WATCHER_TIMEOUT, WATCHER_CRASHED (thread error, memory limit, exit
   * without or with an invalid answer) or WATCHER_CLOSED. Any rejection means the advertisement is
   * denied.
   */
  judge(ad: RawAdvertisement): Promise<WatcherSummary> {
    return new Promise<WatcherSummary>((resolve, reject) => {
      if (this.closed) {
        reject(new WatcherError('WATCHER_CLOSED', 'the DMZ watcher is closed'));
        return;
      }
      const canRunNow = this.standbyThreads.length > 0 || this.live.size < this.maxConcurrent;
      if (!canRunNow && this.waiting.length >= this.maxQueue) {
        reject(
          new WatcherError(
            'WATCHER_BUSY',
            `DMZ watcher is busy: ${this.busy} threads running and ${this.waiting.length} advertisements queued (limit ${this.maxQueue})`,
          ),
        );
        return;
      }
      this.waiting.push({ ad, resolve, reject, queuedAt: performance.now() });
      this.pump(true);
    });
  }

  /** Refuses new work, rejects queued work and terminates running and standby threads (WATCHER_CLOSED). */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.splice(0)) {
      job.reject(
        new WatcherError('WATCHER_CLOSED', 'the DMZ watcher closed before this advertisement was judged'),
      );
    }
    await Promise.allSettled([...this.live].map((w) => w.terminate()));
    await Promise.allSettled([...this.exits]);
  }

  /**
   * Hands waiting advertisements to standby threads, then starts threads, within `maxConcurrent`:
   * one per advertisement still waiting (it gets the advertisement as soon as it has loaded) and,
   * when `refill`, enough to bring the standby back to its target.
   */
  private pump(refill: boolean): void {
    if (this.closed) return;
    this.dropStale();
    while (this.waiting.length > 0 && this.standbyThreads.length > 0)
      this.assign(this.standbyThreads.shift()!, this.waiting.shift()!);
    while (
      this.live.size < this.maxConcurrent &&
      (this.waiting.length > 0 || (refill && this.standbyThreads.length < this.standbyTarget))
    ) {
      const worker = this.spawn();
      if (!worker) return;
      const job = this.waiting.shift();
      if (job) this.assign(worker, job);
      else this.standbyThreads.push(worker);
    }
  }

  /**
   * Rejects (WATCHER_TIMEOUT) queued advertisements that have waited `maxWaitMs` already: by
   * then the admission pipeline has given up on them, and judging them anyway would only delay the
   * fresh ones behind them (under overload the queue would never catch up).
   */
  private dropStale(): void {
    const now = performance.now();
    while (this.waiting.length > 0 && now - this.waiting[0]!.queuedAt >= this.maxWaitMs) {
      const job = this.waiting.shift()!;
      job.reject(
        new WatcherError(
          'WATCHER_TIMEOUT',
          `advertisement waited ${Math.round(now - job.queuedAt)} ms for a watcher thread (limit ${this.maxWaitMs} ms); not judged`,
        ),
      );
    }
  }

  /** Starts one thread; on failure rejects the first waiting job (it would have been its thread). */
  private spawn(): Worker | undefined {
    const input: WatcherThreadInput = {
      kind: THREAD_INPUT_KIND,
      llmBudgetMs: Math.max(1, this.timeoutMs - LLM_DEADLINE_MARGIN_MS),
      llmEnv: this.llmEnv,
    };
    let worker: Worker;
    try {
      worker = new Worker(this.threadUrl, {
        workerData: input,
        // An empty environment: the thread gets secrets only through llmEnv, explicitly.
        env: {},
        // Not the parent's flags (vitest's loaders, inspector...): the thread is plain compiled JS.
        execArgv: [],
        resourceLimits: this.limits,
        stdin: false,
      });
    } catch (err) {
      this.waiting.shift()?.reject(
        new WatcherError('WATCHER_CRASHED', `could not start a watcher thread: ${String(err)}`, {
          cause: err,
        }),
      );
      return undefined;
    }
    this.live.add(worker);
    // Until it has an advertisement, a thread that fails or exits is only dropped from the standby
    // (not replaced at once, so a thread entry that always fails cannot spin).
    const onIdleFailure = (): void => {
      const i = this.standbyThreads.indexOf(worker);
      if (i >= 0) this.standbyThreads.splice(i, 1);
      void worker.terminate();
    };
    worker.on('error', onIdleFailure);
    const exited = new Promise<void>((resolveExit) => {
      worker.once('exit', () => {
        const diedIdle = this.standbyThreads.includes(worker);
        onIdleFailure();
        this.live.delete(worker);
        this.exits.delete(exited);
        resolveExit();
        // The slot is free only once the thread is really gone, so `maxConcurrent` bounds live threads.
        // Waiting work still gets threads; the standby is refilled only after a thread that was used.
        this.pump(!diedIdle);
      });
    });
    this.exits.add(exited);
    return worker;
  }

  /** Gives `job` to `worker` (started, possibly still loading) and watches for its one answer. */
  private assign(worker: Worker, job: Job): void {
    this.busy++;
    let settled = false;
    const settle = (outcome: { summary: WatcherSummary } | { error: WatcherError }): void => {
      if (settled) return;
      settled = true;
      this.busy--;
      clearTimeout(timer);
      if ('summary' in outcome) job.resolve(outcome.summary);
      else job.reject(outcome.error);
      // One advertisement per thread: whatever it was doing, it is done now.
      void worker.terminate();
    };
    const timer = setTimeout(() => {
      settle({
        error: new WatcherError(
          'WATCHER_TIMEOUT',
          `watcher thread gave no answer within ${this.timeoutMs} ms; terminated`,
        ),
      });
    }, this.timeoutMs);
    worker.on('message', (reply: unknown) => {
      const checked = checkThreadReply(reply, job.ad.raw_id);
      if (typeof checked === 'string') {
        settle({
          error: new WatcherError('WATCHER_CRASHED', `watcher thread gave an invalid answer: ${checked}`),
        });
      } else {
        settle({ summary: checked });
      }
    });
    worker.on('error', (err: Error & { code?: string }) => {
      const why =
        err.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? 'watcher thread exceeded its memory limit and was terminated'
          : `watcher thread failed: ${err.message}`;
      settle({ error: new WatcherError('WATCHER_CRASHED', why, { cause: err }) });
    });
    worker.once('exit', (code) => {
      settle({
        error: this.closed
          ? new WatcherError('WATCHER_CLOSED', 'the DMZ watcher closed while this advertisement was judged')
          : new WatcherError('WATCHER_CRASHED', `watcher thread exited (code ${code}) without an answer`),
      });
    });
    const message: WatcherThreadAd = { kind: THREAD_AD_KIND, ad: job.ad };
    worker.postMessage(message);
  }
}
