/**
 * Admission latency with SPIFFE off and on (issue 12): the same coordinator code, once with static
 * identity and once with SVIDs from a real SPIRE agent (scripts/install-spire.sh), in this process.
 *
 *   local  — N new agents at `local` visibility, one at a time, heartbeat → admitted. With SPIFFE on,
 *            each summary is signed by a fresh key vouched for by a fresh JWT-SVID and verified.
 *   mesh   — (SPIFFE on only: static identity denies mesh) N re-advertisements of one SPIRE-attested
 *            agent at `mesh` visibility, each judged again, each with a fresh SVID proof over HTTP.
 *
 * Reported as p50/p99 and as ratios to the SPIFFE-off local run of the same process (the floor).
 * Results go to stdout and to the section "Admission with SPIFFE off and on" of docs/performance.md,
 * which every run overwrites. Environment: BENCH_SPIFFE_AGENTS (default 100), BENCH_SPIFFE_OUT
 * (another page to write the section into; "-" writes none), AMF_SPIRE_DIR (default:
 * scripts/install-spire.sh's cache).
 */
import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PERFORMANCE_PAGE, docSection, writeSection } from './lib/docSection.js';

const run = promisify(execFile);
const ROOT = new URL('../', import.meta.url);
const DIST = new URL('dist/', ROOT);
if (!existsSync(new URL('coordinator/coordinator.js', DIST))) {
  process.stderr.write('bench/admissionSpiffe.js: dist/ is missing: run `npm run build` first\n');
  process.exit(2);
}
const load = (p) => import(new URL(p, DIST).href);
const { Coordinator } = await load('coordinator/coordinator.js');
const { loadConfig } = await load('config/config.js');
const { connectAs } = await load('fabric/connect.js');
const { createEvent } = await load('events/cloudEvent.js');
const { SpiffeIdentity } = await load('identity/spiffeIdentity.js');
const { createRouterServer } = await load('edge/worker/workerHttp.js');
const { addSvidProofRoute, svidGate } = await load('http/svidGate.js');
const { Router } = await load('http/httpKit.js');

const AGENTS = Number(process.env.BENCH_SPIFFE_AGENTS ?? 100);
const OUT = process.env.BENCH_SPIFFE_OUT ?? PERFORMANCE_PAGE;
const TD = 'amf.bench';
const COORDINATOR = `spiffe://${TD}/coordinator`;
const AGENT = `spiffe://${TD}/worker/proven`;
const encoder = new TextEncoder();

const percentile = (sorted, p) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: percentile(s, 50), p99: percentile(s, 99), n: s.length };
};

async function until(probe, ms = 90_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if (await probe()) return;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 200));
  }
}

function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = /** @type {import('node:net').AddressInfo} */ (s.address());
      s.close(() => resolve(port));
    });
  });
}

/** spire-server + join-token spire-agent, as test/identity/spireFixture.ts starts them. */
async function startSpire() {
  // The last line install-spire.sh prints is the directory (split always yields one line at least).
  const bin = /** @type {string} */ (
    process.env.AMF_SPIRE_DIR ??
      (await run('bash', [fileURLToPath(new URL('scripts/install-spire.sh', ROOT))])).stdout
        .trim()
        .split('\n')
        .pop()
  );
  const dir = await mkdtemp(join(tmpdir(), 'amf-bench-spire-'));
  const port = await freePort();
  const ss = join(dir, 'server.sock');
  const as = join(dir, 'agent.sock');
  await writeFile(
    join(dir, 'server.conf'),
    `server { bind_address = "127.0.0.1" bind_port = "${port}" socket_path = "${ss}" trust_domain = "${TD}" data_dir = "${dir}/sd" log_level = "ERROR" }
plugins { DataStore "sql" { plugin_data { database_type = "sqlite3" connection_string = "${dir}/ds.sqlite3" } }
KeyManager "memory" { plugin_data {} } NodeAttestor "join_token" { plugin_data {} } }`,
  );
  const server = spawn(join(bin, 'spire-server'), ['run', '-config', join(dir, 'server.conf')], {
    stdio: 'ignore',
  });
  await until(() => run(join(bin, 'spire-server'), ['healthcheck', '-socketPath', ss]).then(() => true));
  const tokenLine = /Token:\s*(\S+)/.exec(
    (await run(join(bin, 'spire-server'), ['token', 'generate', '-socketPath', ss])).stdout,
  );
  if (!tokenLine) throw new Error('spire-server token generate printed no token');
  const token = tokenLine[1];
  await writeFile(
    join(dir, 'agent.conf'),
    `agent { data_dir = "${dir}/ad" log_level = "ERROR" server_address = "127.0.0.1" server_port = "${port}" socket_path = "${as}" trust_domain = "${TD}" insecure_bootstrap = true }
plugins { NodeAttestor "join_token" { plugin_data {} } KeyManager "memory" { plugin_data {} } WorkloadAttestor "unix" { plugin_data {} } }`,
  );
  const agent = spawn(
    join(bin, 'spire-agent'),
    ['run', '-config', join(dir, 'agent.conf'), '-joinToken', token],
    {
      stdio: 'ignore',
    },
  );
  await until(() => run(join(bin, 'spire-agent'), ['healthcheck', '-socketPath', as]).then(() => true));
  const selectors = [
    '-selector',
    `unix:uid:${process.getuid?.()}`,
    '-selector',
    `unix:gid:${process.getgid?.()}`,
  ];
  for (const id of [COORDINATOR, AGENT])
    await run(join(bin, 'spire-server'), [
      'entry',
      'create',
      '-socketPath',
      ss,
      '-parentID',
      `spiffe://${TD}/spire/agent/join_token/${token}`,
      '-spiffeID',
      id,
      ...selectors,
    ]);
  return {
    socket: `unix://${as}`,
    async close() {
      agent.kill('SIGTERM');
      server.kill('SIGTERM');
      await Promise.all(
        [agent, server].map(
          (p) =>
            /** @type {Promise<void>} */ (
              new Promise((r) => (p.exitCode !== null ? r() : p.once('exit', () => r())))
            ),
        ),
      );
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Starts a coordinator, admits `records()` one at a time, returns the latencies (ms). */
async function measure(env, identityMode, records) {
  const dataDir = await mkdtemp(join(tmpdir(), 'amf-bench-spiffe-'));
  const config = await loadConfig({
    env: { HOME: tmpdir() },
    flags: {
      dataDir,
      logLevel: 'silent',
      coordinator: { port: 0 },
      nats: { port: 0 },
      mdns: { enabled: false },
      identity: { mode: identityMode, trustDomain: TD },
    },
  });
  const waiting = new Map();
  const coordinator = await Coordinator.start({
    config,
    env,
    // The advertiser below publishes as the shared specialist user (present only when asked for).
    legacySpecialistUser: true,
    onAdmission: (o) => {
      if (o.kind === 'admitted' || o.kind === 'denied') {
        waiting.get(o.agentId)?.(o);
        waiting.delete(o.agentId);
      }
    },
  });
  const nc = await connectAs(coordinator.natsUrl, coordinator.credentials.specialist, 'bench-advertiser');
  const latencies = [];
  try {
    for (const record of records) {
      const decided = new Promise((r) => waiting.set(record.agent_id, r));
      const t0 = performance.now();
      const sender = { identity: record.agent_id, source: 'urn:bench', role: 'specialist', trustDomain: TD };
      nc.publish(
        'amf.discovery.agent.heartbeat',
        encoder.encode(
          JSON.stringify(createEvent({ type: 'amf.discovery.agent.heartbeat', sender, payload: record })),
        ),
      );
      const outcome = await decided;
      if (outcome.kind !== 'admitted')
        throw new Error(`${record.agent_id} denied: ${outcome.reasons.join(', ')}`);
      latencies.push(performance.now() - t0);
    }
  } finally {
    await nc.close();
    await coordinator.close();
    await rm(dataDir, { recursive: true, force: true });
  }
  return latencies;
}

const record = (agentId, extra = {}) => ({
  agent_id: agentId,
  endpoint: 'http://127.0.0.1:9',
  protocols_supported: ['A2A/1.0'],
  capability_tags: ['bench'],
  trust_domain: TD,
  visibility: 'local',
  heartbeat_seconds: 30,
  ...extra,
});
const localRecords = () =>
  Array.from({ length: AGENTS }, () => record(`spiffe://${TD}/worker/b-${randomUUID().slice(0, 8)}`));

const spire = await startSpire();
const spiffeEnv = { SPIFFE_ENDPOINT_SOCKET: spire.socket, AMF_SPIFFE_ID: COORDINATOR };
// The proven agent's edge: answers SVID proofs with its own SVID (same process, its own entry).
const agentIdentity = await SpiffeIdentity.open({ socket: spire.socket, spiffeId: AGENT, timeoutMs: 60_000 });
const edge = createRouterServer();
const router = new Router();
addSvidProofRoute(router, agentIdentity);
edge.serve(router, svidGate({ identity: agentIdentity }));
await new Promise((r) => edge.server.listen(0, '127.0.0.1', r));
const agentUrl = `http://127.0.0.1:${edge.server.address().port}`;
try {
  // Warm-up round (JIT, first OPA evaluation, SPIRE caches) is not counted.
  await measure({}, 'static', localRecords().slice(0, 10));
  const off = stats(await measure({}, 'static', localRecords()));
  const on = stats(await measure(spiffeEnv, 'spiffe', localRecords()));
  const meshRecords = Array.from({ length: AGENTS }, (_, i) =>
    record(AGENT, { endpoint: agentUrl, visibility: 'mesh', version: `1.0.${i}` }),
  );
  const mesh = stats(await measure(spiffeEnv, 'spiffe', meshRecords));
  const row = (name, s) =>
    `| ${name} | ${s.n} | ${s.p50.toFixed(1)} | ${s.p99.toFixed(1)} | ${(s.p50 / off.p50).toFixed(2)} | ${(s.p99 / off.p99).toFixed(2)} |`;
  const text = [
    '### Admission with SPIFFE off and on',
    '',
    `Made by \`node bench/admissionSpiffe.js\` (not part of \`npm run bench\`; after \`npm run build\`), Node ${process.version}, ${os.cpus().length} CPUs (shared), SPIRE from scripts/install-spire.sh.`,
    'Latency is heartbeat published → admission decided, one agent at a time; ratios are to the SPIFFE-off',
    'local run of the same process (the floor). Timings are of a shared machine: compare ratios, not ms.',
    '',
    '| run | n | p50 ms | p99 ms | p50 / off | p99 / off |',
    '|---|---|---|---|---|---|',
    row('SPIFFE off, local visibility (floor)', off),
    row('SPIFFE on, local visibility (signed watcher summary)', on),
    row('SPIFFE on, mesh visibility (signed summary + SVID proof)', mesh),
    '',
  ].join('\n');
  process.stdout.write(`${text}\n`);
  if (OUT !== '-') await writeSection(OUT, docSection('admission-spiffe', 'bench/admissionSpiffe.js'), text);
} finally {
  await new Promise((r) => edge.server.close(r));
  await agentIdentity.close();
  await spire.close();
}
