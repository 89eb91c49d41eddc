/**
 * Gives back to the system the memory that glibc's malloc keeps after a burst of work.
 *
 * What Node allocates outside the V8 heap (HTTP bodies copied out of the parser, socket read
 * buffers, `writev` lists, the NATS client's chunks, compilers' scratch space) comes from glibc's
 * malloc, which keeps the pages it freed inside its arenas: after a burst of tasks the coordinator's
 * RSS stayed tens of MB above its start with the V8 heap unchanged (docs/performance.md).
 * `malloc_trim(0)` returns every free page of every arena. Node does not expose it, so it is
 * called through koffi (a foreign-function library with prebuilt binaries for the common
 * platforms), in libuv's thread pool, after each full garbage collection — the moment V8 has just
 * freed the buffers it held — and at most once per `minIntervalMs`.
 *
 * Only Linux with glibc has `malloc_trim`. Anywhere else, with `AMF_MALLOC_TRIM=0`, or when koffi
 * cannot load, nothing is done and `description` says why.
 */
import { createRequire } from 'node:module';
import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';

/** `malloc_trim(0)` run off the main thread; resolves when glibc is done. */
export type MallocTrim = () => Promise<void>;

/** The part of koffi used here. */
interface Koffi {
  load(path: string): {
    func(signature: string): { async(pad: number, done: (err: unknown, released: number) => void): void };
  };
}

/** glibc's `malloc_trim`, or why it cannot be called in this process. */
export function loadMallocTrim(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): { trim: MallocTrim } | { unavailable: string } {
  if (env.AMF_MALLOC_TRIM === '0') return { unavailable: 'turned off by AMF_MALLOC_TRIM=0' };
  if (platform !== 'linux') return { unavailable: `no malloc_trim on ${platform}` };
  let native: ReturnType<ReturnType<Koffi['load']>['func']>;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as Koffi;
    native = koffi.load('libc.so.6').func('int malloc_trim(size_t pad)');
  } catch (err) {
    // musl (Alpine) has no libc.so.6 and no malloc_trim; a platform without koffi's binary lands here too.
    return { unavailable: `glibc's malloc_trim cannot be called here: ${(err as Error).message}` };
  }
  return {
    trim: () =>
      new Promise<void>((resolve) => {
        // A failure only means this trim did not happen; the next full GC tries again.
        try {
          native.async(0, () => resolve());
        } catch {
          resolve();
        }
      }),
  };
}

export interface MemoryTrimmerOptions {
  /**
   * Trims at most this often (default 100 ms): a trim occupies a thread-pool thread, and full
   * collections come back to back near the heap's limit.
   */
  minIntervalMs?: number;
  env?: NodeJS.ProcessEnv;
  /** The trim to run (default {@link loadMallocTrim}'s); tests pass one that counts its calls. */
  trim?: MallocTrim;
}

export interface MemoryTrimmer {
  /** Whether trims run in this process. */
  readonly active: boolean;
  /** One line for the start-up log: what is done, or why nothing is. */
  readonly description: string;
  /** Trims started so far. */
  readonly trims: number;
  stop(): void;
}

/** Starts trimming after every full garbage collection of this process (see the module comment). */
export function startMemoryTrimmer(options: MemoryTrimmerOptions = {}): MemoryTrimmer {
  const loaded = options.trim ? { trim: options.trim } : loadMallocTrim(options.env);
  if ('unavailable' in loaded)
    return {
      active: false,
      description: `memory trimming off: ${loaded.unavailable}`,
      trims: 0,
      stop: () => {},
    };
  const { trim } = loaded;
  const minIntervalMs = options.minIntervalMs ?? 100;
  let lastAt = -Infinity;
  let running = false;
  let trims = 0;
  const observer = new PerformanceObserver((list) => {
    if (running || !list.getEntries().some(isFullCollection)) return;
    const now = performance.now();
    if (now - lastAt < minIntervalMs) return;
    lastAt = now;
    running = true;
    trims += 1;
    void trim().finally(() => (running = false));
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    active: true,
    description: `memory trimming on: glibc malloc_trim after full garbage collections, at most every ${minIntervalMs} ms`,
    get trims() {
      return trims;
    },
    stop: () => observer.disconnect(),
  };
}

function isFullCollection(entry: PerformanceEntry): boolean {
  // Node ≥ 16 puts the collection's kind in `detail` (the typings of PerformanceEntry do not say so).
  // A full collection that finishes incremental marking is reported as incremental, not as major.
  const kind = (entry as { detail?: { kind?: number } }).detail?.kind;
  return kind === constants.NODE_PERFORMANCE_GC_MAJOR || kind === constants.NODE_PERFORMANCE_GC_INCREMENTAL;
}
