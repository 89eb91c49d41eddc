/**
 * Cross-host cost: one request through the mesh with client, coordinator and worker on one host,
 * against the same request with each on a host of its own, on the simulated LAN
 * (scripts/lib/lanSim.mjs: network namespaces on a bridge). Both kinds run interleaved in rounds, in
 * one run, and the result is the ratio of the medians. Needs root (namespaces); prints a skip line
 * otherwise. `node bench/lan.js [--requests 300] [--rounds 4]`.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { canSimulateLan, startLan } from '../scripts/lib/lanSim.mjs';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const AMF = join(ROOT, 'bin/amf.js');
const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const REQUESTS = flag('--requests', 300);
const ROUNDS = flag('--rounds', 4);

function start(host, argv, ready, env) {
  const child = host.spawn(process.execPath, [AMF, ...argv], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready: amf ${argv.join(' ')}\n${out}`)), 60_000);
    child.stdout.on('data', () => {
      if (ready.test(out)) {
        clearTimeout(timer);
        resolve({ child, out: () => out });
      }
    });
    child.once('exit', (code) => reject(new Error(`amf ${argv[0]} exited ${code}:\n${out}`)));
  });
}

function run(host, argv, env) {
  const child = host.spawn(process.execPath, [AMF, ...argv], { env, stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  return new Promise((resolve) => child.once('exit', () => resolve(out)));
}

/** Sequential chat completions from `host`; resolves with each round trip in ms. */
function measure(host, url, key, model, count) {
  const script = `
    const times = [];
    const body = JSON.stringify({ model: ${JSON.stringify(model)}, messages: [{ role: 'user', content: 'ping' }] });
    const headers = { 'content-type': 'application/json', authorization: 'Bearer ${key}' };
    (async () => {
      for (let i = 0; i < ${count + 20}; i++) {
        const t = performance.now();
        const r = await fetch(${JSON.stringify(url)} + '/v1/chat/completions', { method: 'POST', headers, body });
        await r.text();
        if (r.status !== 200) throw new Error('HTTP ' + r.status);
        if (i >= 20) times.push(performance.now() - t);
      }
      process.stdout.write(JSON.stringify(times));
    })();`;
  const child = host.spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  return new Promise((resolve, reject) =>
    child.once('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`client exited ${code}`)),
    ),
  );
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};

async function main() {
  if (!canSimulateLan()) {
    process.stdout.write(
      'bench/lan.js: skipped (needs root, unshare and nsenter to build the simulated LAN)\n',
    );
    return;
  }
  const lan = startLan(3);
  const [h1, h2, h3] = lan.hosts;
  const home = await mkdtemp(join(tmpdir(), 'amf-bench-lan-'));
  const env = {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AMF_'))),
    HOME: home,
  };
  const children = [];
  try {
    const dir1 = join(home, 'h1');
    const coordinatorUrl = `http://${h1.address}:8765`;
    children.push(
      (
        await start(
          h1,
          [
            'up',
            '--host',
            h1.address,
            '--port',
            '8765',
            '--nats-port',
            '4222',
            '--data-dir',
            dir1,
            '--no-mdns',
          ],
          /AMF coordinator/,
          env,
        )
      ).child,
    );
    const key = (await readFile(join(dir1, 'operator.key'), 'utf8')).trim();
    // Same host: a worker beside the coordinator, joined through the data dir.
    children.push(
      (
        await start(
          h1,
          [
            'worker',
            '--name',
            'near',
            '--tags',
            'near',
            '--handler',
            'echo',
            '--port',
            '0',
            '--data-dir',
            dir1,
            '--no-mdns',
            '--coordinator',
            coordinatorUrl,
          ],
          /AMF worker/,
          env,
        )
      ).child,
    );
    // Another host: a worker joined by invite.
    const token = (
      await run(h1, ['invite', '--tags', 'far', '--data-dir', dir1, '--coordinator', coordinatorUrl], env)
    )
      .trim()
      .split('\n')
      .at(-1);
    children.push(
      (
        await start(
          h2,
          [
            'worker',
            '--name',
            'far',
            '--tags',
            'far',
            '--handler',
            'echo',
            '--host',
            h2.address,
            '--port',
            '0',
            '--data-dir',
            join(home, 'h2'),
            '--no-mdns',
            '--invite',
            token,
          ],
          /AMF worker/,
          env,
        )
      ).child,
    );
    await new Promise((r) => setTimeout(r, 2000));
    const same = [];
    const cross = [];
    for (let round = 0; round < ROUNDS; round++) {
      same.push(...(await measure(h1, coordinatorUrl, key, 'amf/near', REQUESTS)));
      cross.push(...(await measure(h3, coordinatorUrl, key, 'amf/far', REQUESTS)));
    }
    const sameP50 = median(same);
    const crossP50 = median(cross);
    process.stdout.write(
      [
        `Cross-host cost (${ROUNDS} rounds × ${REQUESTS} sequential chat completions each, interleaved)`,
        `| path | p50 round trip | ratio |`,
        `|---|---:|---:|`,
        `| same host (client, coordinator, worker on host1) | ${sameP50.toFixed(3)} ms | 1.00× |`,
        `| cross host (client host3 → coordinator host1 → worker host2) | ${crossP50.toFixed(3)} ms | ${(crossP50 / sameP50).toFixed(2)}× |`,
        '',
      ].join('\n'),
    );
  } finally {
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(
      children.map(
        (c) =>
          /** @type {Promise<void>} */ (
            new Promise((r) => (c.exitCode !== null ? r() : c.once('exit', () => r())))
          ),
      ),
    );
    lan.close();
    await rm(home, { recursive: true, force: true });
  }
}

await main();
