/**
 * Counts the NATS messages one mesh task costs, by kind of subject: starts bench/meshServer.js
 * (coordinator, its nats-server, echo worker in its own process, on its own NATS user), listens on `>` as the coordinator
 * role (it sees every subject of the account, JetStream API and acks included), sends
 * BENCH_COUNT_TASKS chat completions one after another and prints messages per task per subject
 * kind. The `$JS.API.*` rows are JetStream API calls; `$JS.ACK` rows are acks and in-progress signals
 * (and the deliveries that carry them as reply subjects are counted under their stream subjects).
 *
 *   npm run build && node bench/countMessages.js
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startMeshProcess, requireBuild, envNumber } from './lib/meshProcess.js';
import { httpPoster } from './lib/load.js';

requireBuild('countMessages');
const TASKS = envNumber('countMessages', 'BENCH_COUNT_TASKS', 200, 1);
const { connectAs } = await import(new URL('../dist/fabric/connect.js', import.meta.url).href);

const { info, stop } = await startMeshProcess();
try {
  const creds = JSON.parse(await readFile(join(info.dataDir, 'credentials.json'), 'utf8'));
  const nc = await connectAs(info.natsUrl, creds.coordinator, 'bench-count');
  const counts = new Map();
  let counting = false;
  /** Task ids and other variable tokens collapse, so one row is one kind of message. */
  const kind = (subject) =>
    // An inbox's last tokens name one request each: every reply to one inbox is one kind.
    (subject.startsWith('_INBOX.') ? subject.split('.').slice(0, 2).concat('*').join('.') : subject)
      .split('.')
      .map((t) => (/[0-9a-f]{8}-|^[0-9]+$|^[A-Za-z0-9_-]{20,}$/.test(t) ? '*' : t))
      .slice(0, 6)
      .join('.');
  nc.subscribe('>', {
    callback: (_err, msg) => {
      if (!counting) return;
      const k = kind(msg.subject);
      counts.set(k, (counts.get(k) ?? 0) + 1);
    },
  });
  await nc.flush();
  const body = JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: 'count me' }] });
  const poster = httpPoster(`${info.coordinatorUrl}/v1/chat/completions`, body, { concurrency: 1 });
  const post = () =>
    /** @type {Promise<void>} */ (
      new Promise((resolve, reject) => poster.issue((err) => (err ? reject(err) : resolve())))
    );
  for (let i = 0; i < 20; i++) await post(); // warm-up, not counted
  await new Promise((r) => setTimeout(r, 300));
  counting = true;
  for (let i = 0; i < TASKS; i++) {
    await post();
  }
  await new Promise((r) => setTimeout(r, 500)); // coalesced KV writes and late acks
  counting = false;
  const rows = [...counts.entries()].sort((a, b) => b[1] - a[1]);
  let total = 0;
  process.stdout.write(`messages per task (${TASKS} tasks at concurrency 1, as seen on '>'):\n`);
  for (const [k, n] of rows) {
    total += n;
    process.stdout.write(`  ${(n / TASKS).toFixed(2).padStart(6)}  ${k}\n`);
  }
  process.stdout.write(`  ${(total / TASKS).toFixed(2).padStart(6)}  total\n`);
  await nc.close();
  poster.close();
} finally {
  await stop();
}
