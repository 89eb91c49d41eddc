/**
 * A small closed-loop load generator: N virtual clients, each sending its next request as soon as the
 * previous one is answered, for a fixed time or a fixed number of requests. Latencies are kept
 * in full (a Float64Array per run) so percentiles are exact, not bucketed.
 *
 * HTTP goes through node:http with one keep-alive agent per target (maxSockets = concurrency), with
 * pre-encoded request bodies and no JSON parsing of answers on the hot path: the generator shares the
 * machine with what it measures, so it must cost as little as possible.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';

/** Growable array of doubles (latencies in ms). */
class Samples {
  constructor(capacity = 1 << 16) {
    this.data = new Float64Array(capacity);
    this.length = 0;
  }

  push(v) {
    if (this.length === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.length++] = v;
  }

  sorted() {
    return this.data.slice(0, this.length).sort();
  }
}

/** Nearest-rank percentile of a sorted array (p in 0..1). */
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.max(1, Math.ceil(p * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1];
}

/**
 * Runs `issue(done)` from `concurrency` loops. `issue` must call `done(error?)` exactly once.
 * Stops after `durationMs` (no new requests after the deadline; in-flight ones are awaited) or once
 * `total` requests have been issued. Returns counts, exact latencies and the achieved rate.
 * @param {{
 *   concurrency: number,
 *   durationMs?: number,
 *   total?: number,
 *   issue: (done: (error?: unknown) => void) => void,
 *   onProgress?: (issued: number) => void,
 * }} options
 */
export function runLoad({ concurrency, durationMs, total, issue, onProgress }) {
  return new Promise((resolve) => {
    const samples = new Samples(total ? Math.min(total, 1 << 22) : 1 << 16);
    let issued = 0;
    let ok = 0;
    let errors = 0;
    let firstError;
    let running = concurrency;
    const start = performance.now();
    const deadline = durationMs !== undefined ? start + durationMs : Infinity;
    const more = () => (total === undefined || issued < total) && performance.now() < deadline;
    const loop = () => {
      if (!more()) {
        running -= 1;
        if (running === 0) {
          const elapsedMs = performance.now() - start;
          const sorted = samples.sorted();
          resolve({
            concurrency,
            ok,
            errors,
            firstError,
            elapsedMs,
            throughput: (ok / elapsedMs) * 1000,
            p50: percentile(sorted, 0.5),
            p90: percentile(sorted, 0.9),
            p99: percentile(sorted, 0.99),
            max: sorted.length ? sorted[sorted.length - 1] : NaN,
          });
        }
        return;
      }
      issued += 1;
      const t0 = performance.now();
      issue((err) => {
        if (err) {
          errors += 1;
          firstError ??= err;
        } else {
          ok += 1;
          samples.push(performance.now() - t0);
          if (onProgress && ok % 1000 === 0) onProgress(ok);
        }
        // Next request on a fresh tick so a synchronous failure cannot recurse without bound.
        if (err) setImmediate(loop);
        else loop();
      });
    };
    for (let i = 0; i < concurrency; i++) loop();
  });
}

/**
 * A POST client for one URL: `issue(done)` sends `body` and calls `done()` on a 200 answer whose body
 * was read in full, `done(error)` otherwise.
 * @param {string} url
 * @param {string | Buffer} body
 * @param {{ concurrency: number, headers?: Record<string, string> }} options
 */
export function httpPoster(url, body, { concurrency, headers = {} }) {
  const u = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency });
  const payload = Buffer.from(body);
  const options = {
    agent,
    host: u.hostname,
    port: u.port,
    path: u.pathname,
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': payload.length, ...headers },
  };
  const issue = (done) => {
    const req = http.request(options, (res) => {
      const status = res.statusCode;
      if (status !== 200) {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          done(new Error(`HTTP ${status} from ${url}: ${Buffer.concat(chunks).toString().slice(0, 300)}`)),
        );
        return;
      }
      res.on('data', noop);
      res.on('end', () => done());
    });
    req.on('error', (err) => done(err));
    req.end(payload);
  };
  /** One request whose body is returned, for a correctness check before the measurement. */
  const once = () =>
    new Promise((resolve, reject) => {
      const req = http.request(options, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString() }),
        );
      });
      req.on('error', reject);
      req.end(payload);
    });
  return { issue, once, close: () => agent.destroy() };
}

function noop() {}

/** GET a URL and return its text (for /metrics scrapes; not on the hot path). */
export function httpGet(url, headers = {}) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString() }));
      })
      .on('error', reject);
  });
}

/** NATS request/reply client: `issue(done)` sends `payload` on `subject` and waits for the reply. */
export function natsRequester(nc, subject, payload, timeoutMs = 10_000) {
  const opts = { timeout: timeoutMs };
  const issue = (done) => {
    nc.request(subject, payload, opts).then(
      (msg) =>
        msg.data.length === payload.length
          ? done()
          : done(new Error(`reply of ${msg.data.length} bytes, expected ${payload.length}`)),
      (err) => done(err),
    );
  };
  return { issue };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** One result row from the rounds of one path: medians of p50, p99 and throughput, and the count. */
export function medianRow(path, concurrency, rounds) {
  return {
    path,
    concurrency,
    p50: median(rounds.map((r) => r.p50)),
    p99: median(rounds.map((r) => r.p99)),
    throughput: median(rounds.map((r) => r.throughput)),
    count: rounds.reduce((n, r) => n + r.ok, 0),
  };
}

/** `1.23 ms` */
export const formatMs = (x) => `${x.toFixed(2)} ms`;
/** `1,234/s` */
export const formatRate = (x) => `${Math.round(x).toLocaleString('en-US')}/s`;
