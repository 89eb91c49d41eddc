/**
 * Cost of a NATS login through AMF's auth callout, against the floor of a static login on the same
 * server in the same run: one nats-server ≥ 2.10 (the pinned binary of scripts/install-nats.sh,
 * $AMF_NATS_CLUSTER_BIN) configured as scripts/cluster.sh configures its nodes, and the coordinator's
 * responder (dist/coordinator/authCallout.js) answering in this process. Logins are sequential,
 * interleaved (static, join, agent key, …), each a full connect + close:
 *
 *   static      amf-watcher, a static user that bypasses the callout (the floor)
 *   join        amf-join through the callout (password checked by the coordinator)
 *   agent key   an admitted agent's nkey through the callout (nonce signature checked, JWT with tags),
 *               the nonce signed as AMF's agents sign it (libsodium), and again with nats.js's signer
 *
 * Environment: BENCH_CALLOUT_LOGINS (300), BENCH_CALLOUT_OUT (the page whose section "NATS logins
 * through the auth callout" it overwrites; default docs/performance.md; "-" writes none).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect, nkeyAuthenticator } from '@nats-io/transport-node';
import { PERFORMANCE_PAGE, docSection, writeSection } from './lib/docSection.js';
import { envNumber as envNumberOf, requireBuild } from './lib/meshProcess.js';

requireBuild('bench/authCallout.js');
const { startAuthCallout } = await import('../dist/coordinator/authCallout.js');
const { calloutKeyFile, loadOrCreateCalloutIssuer } = await import('../dist/identity/calloutIssuer.js');
const { loadOrCreateCredentials } = await import('../dist/fabric/credentials.js');
const { renderNatsConfig } = await import('../dist/fabric/natsServer/config.js');
const { createEphemeralAgentKey } = await import('../dist/identity/agentKey.js');
const { agentAuthenticator } = await import('../dist/fabric/connect.js');

const LOGINS = Math.round(envNumberOf('bench/authCallout.js', 'BENCH_CALLOUT_LOGINS', 300, 10));
const OUT = process.env.BENCH_CALLOUT_OUT ?? PERFORMANCE_PAGE;
const binary = process.env.AMF_NATS_CLUSTER_BIN;
if (!binary)
  throw new Error('bench/authCallout.js: set AMF_NATS_CLUSTER_BIN (scripts/install-nats.sh prints it)');

const port = await new Promise((resolve) => {
  const srv = createServer().listen(0, '127.0.0.1', () => {
    const p = /** @type {import('node:net').AddressInfo} */ (srv.address()).port;
    srv.close(() => resolve(p));
  });
});
const dir = mkdtempSync(join(os.tmpdir(), 'amf-bench-callout-'));
const credentials = await loadOrCreateCredentials(dir, {});
const issuer = await loadOrCreateCalloutIssuer(calloutKeyFile(dir, {}));
const conf = join(dir, 'nats-server.conf');
writeFileSync(
  conf,
  renderNatsConfig({
    host: '127.0.0.1',
    port,
    storeDir: dir,
    credentials,
    authCallout: { issuer: issuer.publicKey },
  }),
);
const server = spawn(binary, ['-c', conf], { stdio: 'ignore' });
const url = `nats://127.0.0.1:${port}`;
const join_ = { user: 'amf-join', password: 'bench-join-password' };
const agent = createEphemeralAgentKey();

try {
  let coordinator;
  for (let i = 0; ; i++) {
    try {
      coordinator = await connect({
        servers: url,
        user: credentials.coordinator.user,
        pass: credentials.coordinator.password,
      });
      break;
    } catch (err) {
      if (i > 100) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const responder = startAuthCallout({
    nc: coordinator,
    issuer,
    credentials,
    join: join_,
    liveAgent: (nkey) => (nkey === agent.publicKey ? { agentId: 'bench-agent', tags: ['echo'] } : undefined),
    ttlSeconds: 300,
    onRefused: () => undefined,
    log: () => undefined,
  });
  await coordinator.flush();

  const kinds = {
    static: { servers: url, user: credentials.watcher.user, pass: credentials.watcher.password },
    join: { servers: url, user: join_.user, pass: join_.password },
    // As AMF's agents log in (connectAsAgent): the nonce signed by the key's libsodium signer.
    'agent key': { servers: url, authenticator: agentAuthenticator(agent) },
    // The same key with nats.js's own authenticator (pure-JS Ed25519), for comparison.
    'agent key, nats.js signer': { servers: url, authenticator: nkeyAuthenticator(agent.seed) },
  };
  const times = Object.fromEntries(Object.keys(kinds).map((k) => [k, /** @type {number[]} */ ([])]));
  const once = async (opts) => {
    const t0 = performance.now();
    const nc = await connect({ ...opts, maxReconnectAttempts: 0 });
    await nc.close();
    return performance.now() - t0;
  };
  for (let i = 0; i < 10; i++) for (const opts of Object.values(kinds)) await once(opts); // warm-up
  for (let i = 0; i < LOGINS; i++)
    for (const [k, opts] of Object.entries(kinds)) times[k].push(await once(opts));
  if (responder.counts.refused !== 0) throw new Error(`${responder.counts.refused} logins were refused`);

  const pct = (xs, p) =>
    [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
  const floor = pct(times.static, 50);
  const rows = Object.entries(times).map(([k, xs]) => {
    const p50 = pct(xs, 50);
    return `| ${k} | ${p50.toFixed(2)} ms | ${pct(xs, 99).toFixed(2)} ms | ${(p50 / floor).toFixed(2)} | +${(p50 - floor).toFixed(2)} ms |`;
  });
  // What a callout login adds is explained in the page's hand-written part.
  const text = [
    '### NATS logins through the auth callout',
    '',
    `Made by \`AMF_NATS_CLUSTER_BIN=… node bench/authCallout.js\` (not part of \`npm run bench\`): ${LOGINS} sequential`,
    'logins of each kind, interleaved, each a full connect + close, on one nats-server configured as',
    "`scripts/cluster.sh` configures its nodes, the coordinator's callout responder in the bench process.",
    `Machine: ${os.cpus().length} cores, Node ${process.version}, load average ${os.loadavg()[0].toFixed(2)} at the end.`,
    '',
    '| login | p50 | p99 | p50 ÷ static | p50 − static |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n');
  process.stdout.write(text);
  if (OUT !== '-') await writeSection(OUT, docSection('auth-callout', 'bench/authCallout.js'), text);
  responder.close();
  await coordinator.close();
} finally {
  server.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}
