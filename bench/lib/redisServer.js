/**
 * A private redis-server for the BullMQ side of bench/taskPath.js: Debian's `redis-server` binary,
 * started on a free 127.0.0.1 port with a fresh temporary directory as its working dir (RDB, AOF and
 * log go there), never the system's service or its config file, and stopped (directory removed) at
 * the end.
 *
 * `aof: true` turns on the append-only file with `appendfsync everysec`, the durability BullMQ's
 * production guide recommends; otherwise Redis 7's default RDB snapshots only.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { clearTimeout, setTimeout } from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';

const START_TIMEOUT_MS = 15_000;

/** A port nobody listens on right now (the OS picks it; redis binds it a moment later). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
      server.close(() => resolve(port));
    });
  });
}

/**
 * Bytes the files under `dir` occupy on disk (allocated blocks, as `du` counts them). A file or
 * directory removed while it is read (nats-server compacting a block, Redis rewriting its AOF)
 * counts as empty.
 */
export function diskBytes(dir) {
  let total = 0;
  for (const entry of gone(() => readdirSync(dir, { withFileTypes: true }), [])) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += diskBytes(path);
    else if (entry.isFile()) total += gone(() => statSync(path).blocks * 512, 0);
  }
  return total;
}

/** `read()`, or `fallback` when what it reads no longer exists. */
function gone(read, fallback) {
  try {
    return read();
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ENOENT') return fallback;
    throw err;
  }
}

/** Runs `redis-cli` against the server; returns its trimmed stdout, or throws with its stderr. */
function cli(port, ...args) {
  const r = spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.error) throw r.error;
  if (r.status !== 0)
    throw new Error(`redis-cli ${args.join(' ')}: ${r.stderr.trim() || `exit ${r.status}`}`);
  return r.stdout.trim();
}

/** True when `redis-server` and `redis-cli` can be run. */
export function redisInstalled() {
  const server = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  const client = spawnSync('redis-cli', ['--version'], { encoding: 'utf8' });
  return server.status === 0 && client.status === 0 ? server.stdout.trim() : undefined;
}

/**
 * Starts redis-server; resolves with `{ port, pid, dir, version, keptBytes(), stop() }` once it answers
 * PING. `keptBytes()` makes what Redis keeps durable (SAVE for RDB; the AOF is already on disk, the
 * rewrite left to Redis) and returns the bytes of its working directory.
 */
export async function startRedis({ aof }) {
  const dir = mkdtempSync(join(tmpdir(), 'amf-bench-redis-'));
  const port = await freePort();
  const args = [
    '--bind',
    '127.0.0.1',
    '--port',
    String(port),
    '--dir',
    dir,
    '--daemonize',
    'no',
    '--protected-mode',
    'yes',
    '--logfile',
    join(dir, 'redis.log'),
    // BullMQ refuses to run against an evicting Redis; noeviction is Redis's default, stated here so a
    // changed default cannot drop jobs during the bench.
    '--maxmemory-policy',
    'noeviction',
    ...(aof ? ['--appendonly', 'yes', '--appendfsync', 'everysec'] : ['--appendonly', 'no']),
  ];
  const child = spawn('redis-server', args, { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const alive = () => child.exitCode === null && child.signalCode === null;
  const kill = () => {
    if (alive()) child.kill('SIGKILL');
  };
  process.on('exit', kill);
  const stop = async () => {
    if (alive()) {
      child.kill('SIGTERM');
      const timer = setTimeout(kill, 10_000);
      await exited;
      clearTimeout(timer);
    }
    process.off('exit', kill);
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (!alive()) {
      await stop();
      throw new Error(`redis-server exited during start-up (port ${port}); see its log in ${dir}`);
    }
    try {
      if (cli(port, 'PING') === 'PONG') break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer PING on port ${port} within ${START_TIMEOUT_MS / 1000} s`);
    }
    await sleep(50);
  }
  const version = /redis_version:(\S+)/.exec(cli(port, 'INFO', 'server'))?.[1] ?? 'unknown';
  return {
    port,
    pid: child.pid,
    dir,
    version,
    aof,
    keptBytes: () => {
      if (!aof) cli(port, 'SAVE');
      return diskBytes(dir) - statSync(join(dir, 'redis.log')).blocks * 512;
    },
    stop,
  };
}
