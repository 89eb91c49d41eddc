/**
 * The settings of `npm run bench` (bench/run.js), read from the environment and checked once: an
 * unreadable value stops the run with a message and exit code 2 before anything starts. The
 * variables are listed in bench/run.js's header.
 */
import { PERFORMANCE_PAGE } from './docSection.js';

function envNumber(name, fallback, { min = 0 } = {}) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min) fail(`${name}=${raw} is not a number >= ${min}`);
  return n;
}

/**
 * Stops the run: a setting (or the build) is not usable.
 * @param {string} message
 * @returns {never}
 */
export function fail(message) {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(2);
}

export const CONCURRENCIES = (process.env.BENCH_CONCURRENCY ?? '1,64')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean)
  .map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 1 || n > 4096)
      fail(`BENCH_CONCURRENCY: "${s}" is not an integer in 1..4096`);
    return n;
  });
export const SECONDS = envNumber('BENCH_SECONDS', 5, { min: 0.1 });
export const WARMUP_SECONDS = envNumber('BENCH_WARMUP_SECONDS', 1);
export const ROUNDS = Math.round(envNumber('BENCH_ROUNDS', 3, { min: 1 }));
export const TASKS = Math.round(envNumber('BENCH_TASKS', 100_000));
export const MEMORY_CONCURRENCY = Math.round(envNumber('BENCH_MEMORY_CONCURRENCY', 64, { min: 1 }));
const ALL_PATHS = ['bare', 'nats', 'direct', 'mesh'];
export const PATHS = (process.env.BENCH_PATHS ?? ALL_PATHS.join(',')).split(',').map((s) => s.trim());
for (const p of PATHS)
  if (!ALL_PATHS.includes(p)) fail(`BENCH_PATHS: unknown path "${p}" (expected ${ALL_PATHS.join(', ')})`);
export const OUT = process.env.BENCH_OUT ?? PERFORMANCE_PAGE;
export const CHILD_FLAGS = (process.env.BENCH_CHILD_FLAGS ?? '').split(/\s+/).filter(Boolean);

export const TARGETS = {
  overheadMs: 1.0, // mesh p50 − direct p50 at concurrency 1
  meshThroughput: 3000, // req/s at concurrency 64
  rssBytes: 150 * 1024 * 1024, // coordinator RSS after BENCH_TASKS
};
