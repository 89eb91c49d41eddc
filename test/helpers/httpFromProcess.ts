/**
 * HTTP requests sent by another OS process (`node -e`) whose environment holds no AMF setting, no
 * HOME and so no data dir: an attacker on this machine with no credential, as far as AMF can tell.
 * A request may name the local address it leaves from (`localAddress`), so a second address on lo
 * stands for a caller beyond loopback; the worker sees that address as the socket's remote end.
 */
import { execFile } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface ProcessProbe {
  method: string;
  url: string;
  headers?: Record<string, string>;
  body?: unknown;
  /** The source address of the connection (default: the kernel's choice, loopback for 127.0.0.1). */
  localAddress?: string;
  /** Give up after this long (status 0, body `timeout`); default 5 s. */
  timeoutMs?: number;
}

export interface ProcessAnswer {
  status: number;
  body: string;
}

const SCRIPT = `
const http = require('node:http');
const probes = JSON.parse(process.argv[1]);
function send(p) {
  return new Promise((resolve) => {
    const u = new URL(p.url);
    const body = p.body === undefined ? undefined : JSON.stringify(p.body);
    const headers = { ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {}), ...(p.headers || {}) };
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: p.method, headers, agent: false,
      ...(p.localAddress ? { localAddress: p.localAddress } : {}) }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => { clearTimeout(timer); resolve({ status: res.statusCode, body: text.slice(0, 4000) }); });
    });
    const timer = setTimeout(() => { req.destroy(); resolve({ status: 0, body: 'timeout' }); }, p.timeoutMs || 5000);
    req.on('error', (e) => { clearTimeout(timer); resolve({ status: -1, body: e.message }); });
    req.end(body);
  });
}
(async () => {
  const out = [];
  for (const p of probes) out.push(await send(p));
  process.stdout.write(JSON.stringify(out));
})();`;

/** Sends `probes` one after the other from a fresh `node -e` process; resolves their answers. */
export async function fromAnotherProcess(probes: ProcessProbe[]): Promise<ProcessAnswer[]> {
  const { stdout } = await run(process.execPath, ['-e', SCRIPT, JSON.stringify(probes)], {
    env: { PATH: process.env.PATH ?? '' },
    timeout: 60_000,
  });
  return JSON.parse(stdout) as ProcessAnswer[];
}

/** The second address on lo that stands for a caller beyond loopback. */
export const BEYOND_LOOPBACK_ADDRESS = '10.99.0.1';

/**
 * Adds {@link BEYOND_LOOPBACK_ADDRESS} to lo, only inside a private network namespace (nothing but
 * lo: root inside `unshare -n`, as the tests are run); false where this environment cannot.
 */
export async function addBeyondLoopbackAddress(): Promise<boolean> {
  const interfaces = networkInterfaces();
  if (!Object.keys(interfaces).every((name) => name === 'lo')) return false;
  const has = () => (networkInterfaces().lo ?? []).some((a) => a.address === BEYOND_LOOPBACK_ADDRESS);
  if (has()) return true;
  try {
    await run('ip', ['addr', 'add', `${BEYOND_LOOPBACK_ADDRESS}/32`, 'dev', 'lo']);
  } catch {
    // Added meanwhile by another test file of this run is fine; no permission is not.
  }
  return has();
}
