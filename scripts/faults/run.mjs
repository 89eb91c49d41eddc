#!/usr/bin/env node
/**
 * `npm run faults`: the fault drill command line. See --help, and docs/reliability.md "Fault drill".
 * It needs a built tree (npm run build). mDNS is multicast, so the drill runs inside a private
 * network namespace: as root outside one, it re-executes itself under `unshare -n` with lo up.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { FULL, QUICK, rowFails, runDrill } from './drill.mjs';
import { REPO } from './mesh.mjs';
import { inPrivateNetns, killAllGroups } from './procs.mjs';
import { formatReport } from './report.mjs';

const HELP = `usage: npm run faults -- [options]   (or node scripts/faults/run.mjs [options])

Runs each fault against a fresh real mesh (amf up, amf worker, nats-server) under load, then audits
the AMF_EVENTS stream: per fault, requests, answered, client-visible errors by reason, tasks lost
(accepted, no terminal event), tasks with more than one terminal event (and, for fault 12, tasks run
twice), answers that are not the task's own or contradict its record (wrong), and whether a fresh
request succeeds afterwards without help. Exit code 1 when any row loses, doubles, answers wrong or
does not recover.

Faults: 1 SIGKILL 1 of 2 workers; 2 SIGSTOP a worker; 3 external NATS down 5 s; 4 external NATS
down 40 s; 5 SIGKILL the spawned nats-server; 6 SIGKILL + restart the coordinator; 7 two
coordinators on one NATS, SIGKILL one; 8 Ctrl-C on amf up --demo; 9 3-node NATS cluster: a
node SIGKILLed and restarted, then 1 of 2 coordinators SIGKILLed; 10 SIGKILL the coordinator and
1 of 2 workers together, restart the coordinator; 11 the same with its only worker, the
coordinator restarted alone; 12 partition: coordinator B cut off from a 3-node cluster (30 s,
quick 10 s) and healed, every handler run counted; 13 SIGSTOP the spawned nats-server; 14 SIGKILL a
worker mid-stream; 15 a handler that never settles; 16 3 SIGTERM restarts of the coordinator; 17 the
data disk fills (root); 18 a record of an AMF_EVENTS block overwritten, the mesh restarted (the loss
must be named); 19 coordinator and only worker SIGKILLed with ~50 queued, the worker back after the
tasks ended (none may run); 20 a worker never admitted (card unreachable) on external NATS with the
shared user (none may run there, none twice).

Options:
  --quick            ${QUICK.requests} requests, concurrency ${QUICK.concurrency}, ${QUICK.sleepMs / 1000} s handler, fault at ${QUICK.faultAtMs / 1000} s (CI)
                     (default: ${FULL.requests}, ${FULL.concurrency}, ${FULL.sleepMs / 1000} s, ${FULL.faultAtMs / 1000} s)
  --only 1,2,5       run these faults only
  --requests N  --concurrency C  --sleep SECONDS  --fault-at SECONDS   override the numbers
  --lanes N          faults run at once, each on its own mesh (default 3; 1 = one after another)
  --out FILE         also write the report (markdown) to FILE
  --keep             keep the temp dir with every process's log
  --help

Needs a built tree (npm run build) and nats-server on PATH (or AMF_NATS_SERVER_BIN). Runs inside a
private network namespace: when it is not in one and runs as root, it re-executes itself under
\`unshare -n\` with lo up (multicast routed on lo for mDNS). Not root and not isolated: it runs on
the host loopback with mDNS off (workers join through NATS heartbeats). Bounded to 10 minutes.`;

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    requests: { type: 'string' },
    concurrency: { type: 'string' },
    sleep: { type: 'string' },
    'fault-at': { type: 'string' },
    lanes: { type: 'string', default: '3' },
    out: { type: 'string' },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write(HELP + '\n');
  process.exit(0);
}

const isolated = await inPrivateNetns();
if (!isolated && process.getuid?.() === 0 && process.env.AMF_DRILL_NETNS !== '1') {
  const setup =
    'ip link set lo up && ip link set lo multicast on && (ip route add 224.0.0.0/4 dev lo 2>/dev/null || true)';
  const self = fileURLToPath(import.meta.url);
  const res = spawnSync(
    'unshare',
    ['-n', 'bash', '-c', `${setup} && exec "$0" "$@"`, process.execPath, self, ...process.argv.slice(2)],
    { stdio: 'inherit', env: { ...process.env, AMF_DRILL_NETNS: '1' } },
  );
  process.exit(res.status ?? 1);
}

// Whatever ends this process, no mesh process outlives it.
process.on('exit', killAllGroups);
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, () => {
    killAllGroups();
    process.exit(130);
  });
}

const num = (v, scale = 1) => (v === undefined ? undefined : Math.round(Number(v) * scale));
const params = Object.fromEntries(
  Object.entries({
    requests: num(values.requests),
    concurrency: num(values.concurrency),
    sleepMs: num(values.sleep, 1000),
    faultAtMs: num(values['fault-at'], 1000),
  }).filter(([, v]) => v !== undefined),
);
const only = values.only?.split(',').map(Number);
const commit = spawnSync('git', ['-C', REPO, 'rev-parse', '--short', 'HEAD'], {
  encoding: 'utf8',
}).stdout?.trim();
if (!isolated) process.stderr.write('not in a private network namespace: mDNS off, host loopback only\n');

const result = await runDrill({
  quick: values.quick,
  only,
  lanes: Number(values.lanes),
  params,
  mdns: isolated,
  keep: values.keep,
  log: (line) => process.stderr.write(line + '\n'),
});
const report = formatReport(result, { quick: values.quick, commit });
process.stdout.write('\n' + report);
if (values.out) writeFileSync(values.out, report);
if (values.keep) process.stderr.write(`logs kept in ${result.root}\n`);
process.exitCode = result.rows.some(rowFails) ? 1 : 0;
