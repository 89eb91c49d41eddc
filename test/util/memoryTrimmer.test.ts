import { describe, expect, it, vi } from 'vitest';
import { loadMallocTrim, startMemoryTrimmer, type MallocTrim } from '../../src/util/memoryTrimmer.js';
import { fullGc } from '../helpers/forceGc.js';

/** glibc's trim, counted: the real call, run as the trimmer would run it. */
function countedTrim(): { trim: MallocTrim; calls: () => number } {
  const loaded = loadMallocTrim({});
  if ('unavailable' in loaded) throw new Error(`this test needs glibc's malloc_trim: ${loaded.unavailable}`);
  let calls = 0;
  return {
    trim: () => {
      calls += 1;
      return loaded.trim();
    },
    calls: () => calls,
  };
}

const rssMb = (): number => process.memoryUsage.rss() / 1048576;

describe('memory trimmer', () => {
  it('gives malloc pages freed between live allocations back to the system', async () => {
    const loaded = loadMallocTrim({});
    if ('unavailable' in loaded) throw new Error(loaded.unavailable);
    // 80 MB in 4 KB pieces from malloc, every 50th kept: the free ones lie between live ones, so
    // free() alone cannot shrink the heap (what the mesh's HTTP and NATS buffers leave behind).
    let pieces: Buffer[] | undefined = Array.from({ length: 20_000 }, () => Buffer.allocUnsafeSlow(4000));
    const kept = pieces.filter((_, i) => i % 50 === 0);
    pieces = undefined;
    fullGc();
    await new Promise((resolve) => setTimeout(resolve, 200)); // V8 frees array buffers concurrently
    fullGc();
    const before = rssMb();
    await loaded.trim();
    const after = rssMb();
    expect(kept).toHaveLength(400);
    expect(before - after).toBeGreaterThan(40);
  });

  it('trims after a full collection, at most once per interval', async () => {
    const counted = countedTrim();
    const trimmer = startMemoryTrimmer({ trim: counted.trim, minIntervalMs: 60_000 });
    try {
      expect(trimmer.active).toBe(true);
      fullGc();
      await vi.waitFor(() => expect(counted.calls()).toBe(1));
      fullGc();
      fullGc();
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(counted.calls()).toBe(1);
      expect(trimmer.trims).toBe(1);
    } finally {
      trimmer.stop();
    }
  });

  it('does nothing more once stopped', async () => {
    const counted = countedTrim();
    const trimmer = startMemoryTrimmer({ trim: counted.trim, minIntervalMs: 0 });
    fullGc();
    await vi.waitFor(() => expect(counted.calls()).toBeGreaterThan(0));
    trimmer.stop();
    const calls = counted.calls();
    fullGc();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(counted.calls()).toBe(calls);
  });

  it('is off where malloc_trim is not, or when AMF_MALLOC_TRIM=0 says so', () => {
    expect(loadMallocTrim({ AMF_MALLOC_TRIM: '0' })).toEqual({
      unavailable: 'turned off by AMF_MALLOC_TRIM=0',
    });
    expect(loadMallocTrim({}, 'darwin')).toEqual({ unavailable: 'no malloc_trim on darwin' });
    const off = startMemoryTrimmer({ env: { AMF_MALLOC_TRIM: '0' } });
    expect(off.active).toBe(false);
    expect(off.description).toBe('memory trimming off: turned off by AMF_MALLOC_TRIM=0');
    off.stop();
  });
});
