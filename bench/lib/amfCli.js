/**
 * The AMF side of bench/taskPath.js, started the way a user runs it: `amf up --no-mdns` (which spawns
 * its nats-server) and `amf worker --handler echo --no-mdns` in a process of its own, sharing a fresh
 * temporary data dir (the data dir is the invite on one machine). Its amf.yaml changes two things from
 * the defaults, both printed in the report: log level warn, and an HTTP rate limit that one load
 * generator (one client on 127.0.0.1) never reaches, so the limiter's cost is counted but not its limit.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL, fileURLToPath } from 'node:url';
import { startChild } from './children.js';
import { httpPoster } from './load.js';
import { diskBytes } from './redisServer.js';

const AMF = fileURLToPath(new URL('../../bin/amf.js', import.meta.url));
const READY_TIMEOUT_MS = 60_000;

export const AMF_NON_DEFAULTS = {
  log_level: 'warn (default info)',
  'http.rate_limit_per_second': '1000000 (default 1000): one load generator is one client',
  'http.rate_limit_burst': '1000000 (default 2000)',
};

/** POSTs a chat completion for `amf/echo`; resolves with the status and body text. */
async function chat(url, text) {
  const body = JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: text }] });
  const poster = httpPoster(`${url}/v1/chat/completions`, body, { concurrency: 1 });
  try {
    return await poster.once();
  } finally {
    poster.close();
  }
}

/**
 * Starts coordinator and worker; resolves with `{ url, coordinatorPid, workerPid, natsPid, dataDir,
 * storeBytes(), stop() }` once a chat completion for `amf/echo` comes back echoed. `nodeFlags` are
 * given to both node processes (as `npm start` gives AMF_NODE_FLAGS to the mesh).
 * @param {{ nodeFlags?: string[], workerConcurrency?: number }} options
 */
export async function startAmf({ nodeFlags = [], workerConcurrency = 16 }) {
  const dataDir = mkdtempSync(join(tmpdir(), 'amf-bench-taskpath-'));
  writeFileSync(
    join(dataDir, 'amf.yaml'),
    [
      'log_level: warn',
      'http: { rate_limit_per_second: 1000000, rate_limit_burst: 1000000 }',
      `worker: { concurrency: ${workerConcurrency} }`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  // Only what the mesh needs from this environment: a developer's AMF_* settings must not change the
  // bench; AMF_NATS_SERVER_BIN (the pinned nats-server of `npm run bench`) is the one kept.
  const env = {
    PATH: process.env.PATH,
    HOME: dataDir,
    ...(process.env.AMF_NATS_SERVER_BIN ? { AMF_NATS_SERVER_BIN: process.env.AMF_NATS_SERVER_BIN } : {}),
  };
  const stops = [];
  const stop = async () => {
    for (const s of stops.reverse()) await s().catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    const up = await startChild(
      process.execPath,
      [...nodeFlags, AMF, 'up', '--port', '0', '--no-mdns', '--nats-port', '0', '--data-dir', dataDir],
      { ready: /^AMF coordinator http:\/\/127\.0\.0\.1:\d+$/, env, timeoutMs: READY_TIMEOUT_MS },
    );
    stops.push(up.stop);
    const url = up.line.split(' ').at(-1);
    const natsPid = Number(readFileSync(join(dataDir, 'nats-server.pid'), 'utf8').trim());
    const worker = await startChild(
      process.execPath,
      [
        ...nodeFlags,
        AMF,
        'worker',
        '--name',
        'bench-echo',
        '--tags',
        'echo',
        '--handler',
        'echo',
        '--no-mdns',
        '--port',
        '0',
        '--coordinator',
        url,
        '--data-dir',
        dataDir,
      ],
      { ready: /listening|http:\/\/127\.0\.0\.1:\d+/, env, timeoutMs: READY_TIMEOUT_MS },
    );
    stops.push(worker.stop);
    // Admitted and serving: a task goes through (404 model_not_found until the worker is live).
    const text = 'is the echo worker there?';
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      const res = await chat(url, text);
      if (res.status === 200 && res.text.includes(text)) break;
      if (res.status !== 404 || Date.now() > deadline)
        throw new Error(`amf/echo did not answer: HTTP ${res.status} ${res.text.slice(0, 300)}`);
      await sleep(100);
    }
    const storeDir = join(dataDir, 'nats');
    return {
      url,
      coordinatorPid: up.pid,
      workerPid: worker.pid,
      natsPid,
      dataDir,
      storeBytes: () => diskBytes(storeDir),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
