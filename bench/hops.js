/**
 * Where the time of one mesh request goes, hop by hop, at concurrency 1: a NATS observer (coordinator
 * role, in this process) timestamps the announce, claim and final events of each completion while the
 * load generator sends them one at a time, and the medians of the gaps are printed.
 *
 *   node bench/hops.js            (after `npm run build`; run it inside `unshare -n` like the bench)
 *
 * Environment: BENCH_HOPS_REQUESTS (default 2000), BENCH_SEPARATE_WORKER=1 (worker in its own process).
 * The observer adds a little work of its own to nats-server and to this process; the gaps are
 * indicative, the bench's p50 is the number to quote.
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { httpPoster, percentile } from './lib/load.js';

const DIST = new URL('../dist/', import.meta.url);
const { connectAs } = await import(new URL('fabric/connect.js', DIST).href);
const { loadOrCreateCredentials } = await import(new URL('fabric/credentials.js', DIST).href);

const N = Number(process.env.BENCH_HOPS_REQUESTS ?? 2000);
const child = spawn(
  process.execPath,
  ['--expose-gc', fileURLToPath(new URL('meshServer.js', import.meta.url))],
  {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  },
);
process.on('exit', () => child.kill('SIGKILL'));
const info = JSON.parse(
  await new Promise((r) =>
    createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) }).once('line', r),
  ),
);
const credentials = await loadOrCreateCredentials(info.dataDir, {});
const nc = await connectAs(info.natsUrl, credentials.coordinator, 'bench-hops-observer');

// Arrival times of the current request's events, by kind (first copy only).
let seen = {};
const mark = (kind) => {
  seen[kind] ??= performance.now();
};
nc.subscribe('amf.task.announce.echo', { callback: () => mark('announce') });
nc.subscribe('amf.task.claim', { callback: () => mark('claim') });
nc.subscribe('amf.result.final', { callback: () => mark('final') });
await nc.flush();

const text = 'Hello from the AMF benchmark: please echo this sentence back, word for word.';
const body = JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: text }] });
const client = httpPoster(`${info.coordinatorUrl}/v1/chat/completions`, body, { concurrency: 1 });
/** @type {Record<'announce' | 'claim' | 'final' | 'answer' | 'total', number[]>} */
const gaps = { announce: [], claim: [], final: [], answer: [], total: [] };
for (let i = 0; i < N + 200; i++) {
  seen = {};
  const t0 = performance.now();
  await /** @type {Promise<void>} */ (
    new Promise((resolve, reject) => client.issue((err) => (err ? reject(err) : resolve())))
  );
  const t1 = performance.now();
  // The observer may see the last events just after the answer: give it a moment.
  if (seen.final === undefined) await new Promise((r) => setImmediate(r));
  if (i < 200 || seen.announce === undefined || seen.claim === undefined || seen.final === undefined)
    continue;
  gaps.announce.push(seen.announce - t0);
  gaps.claim.push(seen.claim - seen.announce);
  gaps.final.push(seen.final - seen.claim);
  gaps.answer.push(t1 - seen.final);
  gaps.total.push(t1 - t0);
}
client.close();
const med = (a) => percentile(Float64Array.from(a).sort(), 0.5).toFixed(3);
process.stdout.write(
  [
    `median over ${gaps.total.length} requests at concurrency 1 (ms, as seen by an observer on NATS):`,
    `  HTTP request → announce on NATS   ${med(gaps.announce)}   (load generator, coordinator HTTP edge, dispatcher, nats-server)`,
    `  announce → claim on NATS          ${med(gaps.claim)}   (nats-server → worker: decode, validate, claim)`,
    `  claim → final on NATS             ${med(gaps.final)}   (worker: handler, final event)`,
    `  final → HTTP answer received      ${med(gaps.answer)}   (coordinator: claim + final processing, HTTP answer, load generator)`,
    `  total                             ${med(gaps.total)}`,
    '',
  ].join('\n'),
);
await nc.close();
child.kill('SIGTERM');
await new Promise((r) => child.once('exit', r));
