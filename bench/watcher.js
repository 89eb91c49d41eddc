/**
 * The DMZ watcher alone (no NATS, no coordinator): N advertisements at once through a DmzWatcher
 * with its defaults, then 200 one at a time; judgements per second, latency, and the CPU of the
 * whole process (main thread and watcher threads) per advertisement. Not part of `npm run bench`;
 * run `npm run build && node bench/watcher.js [N]`. BENCH_WATCHER_RECYCLE_AFTER sets recycleAfter.
 */
import { existsSync } from 'node:fs';

const DIST = new URL('../dist/', import.meta.url);
if (!existsSync(new URL('watcher/watcherPool.js', DIST))) {
  process.stderr.write('bench/watcher.js: dist/ is missing: run `npm run build` first\n');
  process.exit(2);
}
const { DmzWatcher } = await import(new URL('watcher/watcherPool.js', DIST).href);
const { DEFAULT_RECYCLE_AFTER } = await import(new URL('watcher/watcherOptions.js', DIST).href);

const N = Number(process.argv[2] ?? 1000);
const recycleAfter = Number(process.env.BENCH_WATCHER_RECYCLE_AFTER ?? DEFAULT_RECYCLE_AFTER);
const ad = (i) => ({
  raw_id: `r${i}`,
  door: 'nats',
  source: 'bench',
  received_at: new Date().toISOString(),
  txt_bytes: 200,
  txt: {
    id: `spiffe://local/worker/a${i}`,
    ep: 'http://127.0.0.1:8766',
    card: 'http://127.0.0.1:8766/card',
    proto: 'A2A/1.0,MCP/2024-11-05',
    tags: 'echo,text-summarize',
    td: 'local',
    vis: 'local',
    mcp: 'http://127.0.0.1:8766/mcp',
  },
});
const cpuMs = (since) => {
  const c = process.cpuUsage(since);
  return (c.user + c.system) / 1000;
};

const w = new DmzWatcher({ recycleAfter, maxQueue: N, maxWaitMs: 60_000, timeoutMs: 60_000 });
while (w.standby < 2) await new Promise((r) => setTimeout(r, 20));

const burstCpu = process.cpuUsage();
const t0 = performance.now();
await Promise.all(Array.from({ length: N }, (_, i) => w.judge(ad(i))));
const burstMs = performance.now() - t0;
const burstCpuMs = cpuMs(burstCpu);

const latencies = [];
const oneCpu = process.cpuUsage();
for (let i = 0; i < 200; i++) {
  const s = performance.now();
  await w.judge(ad(i));
  latencies.push(performance.now() - s);
}
const oneCpuMs = cpuMs(oneCpu);
latencies.sort((a, b) => a - b);
await w.close();

console.log(
  JSON.stringify({
    recycleAfter,
    burst: { n: N, perSecond: Math.round((N / burstMs) * 1000), cpuMsPerAd: +(burstCpuMs / N).toFixed(2) },
    oneAtATime: {
      n: 200,
      p50Ms: +latencies[99].toFixed(2),
      p99Ms: +latencies[197].toFixed(2),
      cpuMsPerAd: +(oneCpuMs / 200).toFixed(2),
    },
    threadsStarted: w.threadsStarted,
  }),
);
