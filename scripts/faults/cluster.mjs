/**
 * Fault 9: a mesh on a 3-node NATS JetStream cluster (replicated streams and KV), two coordinators
 * and two workers; under load one NATS node is SIGKILLed and restarted on its store, then one
 * coordinator is SIGKILLed. The node configs come from AMF's own renderer
 * (src/fabric/natsServer/cluster.ts, what scripts/cluster.sh writes through
 * scripts/cluster-config.mjs), with the auth callout on as there: agents log in with their own
 * keys, answered by whichever coordinator is up; each node runs in a process group of its own so it
 * can be killed alone.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { startCuttableProxy } from '../lib/cuttableProxy.mjs';
import { readEventsLive, readRunLog } from './audit.mjs';
import { REPO, freePort, fromDist, meshCredentials, startCoordinator } from './mesh.mjs';
import { startProcess } from './procs.mjs';

const NODES = 3;

/**
 * The nats-server for clustered JetStream (and fault 18's store): $AMF_NATS_CLUSTER_BIN, else the
 * pinned one (installed on first use).
 */
export async function clusterBinary() {
  if (process.env.AMF_NATS_CLUSTER_BIN) return process.env.AMF_NATS_CLUSTER_BIN;
  const { stdout } = await promisify(execFile)('bash', [join(REPO, 'scripts/install-nats.sh')], {
    timeout: 10 * 60_000,
  });
  return stdout.trim().split('\n').pop();
}

/** Distinct free loopback ports (routes must name their peers' ports before any node starts). */
async function freePorts(n) {
  const ports = new Set();
  while (ports.size < n) ports.add(await freePort());
  return [...ports];
}

/**
 * Starts the cluster under `dir` with the mesh's credentials and waits until JetStream answers
 * (a meta leader is elected). Returns the client URL list and kill/restart of one node.
 */
async function startCluster(run, { dir, credentials, issuer, systemUser, noAdvertise = false }) {
  const binary = await clusterBinary();
  const { planCluster, renderClusterNodeConfig, clusterClientUrls } = await fromDist(
    'fabric/natsServer/cluster.js',
  );
  const { writePrivateFile } = await fromDist('fabric/credentials.js');
  const ports = await freePorts(NODES * 2);
  const plan = planCluster({ dir, clientPorts: ports.slice(0, NODES), routePorts: ports.slice(NODES) });
  const configs = [];
  for (const [i, node] of plan.nodes.entries()) {
    await mkdir(node.storeDir, { recursive: true, mode: 0o700 });
    const conf = join(node.storeDir, 'nats-server.conf');
    // As scripts/cluster.sh renders them by default: every login but the role users' goes to the
    // coordinators (auth callout), sealed with the mesh's curve key; the coordinators have a
    // system-account user to close revoked agents' connections.
    const callout = { calloutIssuer: issuer.publicKey, calloutXkey: issuer.xkeyPublicKey, systemUser };
    let text = renderClusterNodeConfig(plan, i, credentials, callout);
    // Clients learn no other node's URL: one given a single URL stays on that node (the partition).
    if (noAdvertise) text = text.replace(/^cluster \{$/m, 'cluster {\n  no_advertise: true');
    await writePrivateFile(conf, text);
    configs.push(conf);
  }
  const procs = [];
  const start = async (i) => {
    const name = plan.nodes[i].name;
    const proc = startProcess(binary, ['-c', configs[i]], {
      label: name,
      logFile: join(run.logDir, `${name}.log`),
    });
    run.track(proc);
    procs[i] = proc;
    await proc.waitFor(/Server is ready/, 30_000);
  };
  await Promise.all(plan.nodes.map((_, i) => start(i)));
  const urls = clusterClientUrls(plan);
  await waitForJetStream(urls, credentials, 60_000);
  return {
    plan,
    urls,
    kill: (i) => procs[i].kill(),
    restart: (i) => start(i),
  };
}

/** Polls until the cluster's JetStream answers an account info request as the coordinator role. */
async function waitForJetStream(urls, credentials, timeoutMs) {
  const { connectAs } = await fromDist('fabric/connect.js');
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    let nc;
    try {
      nc = await connectAs(urls, credentials.coordinator, 'amf-fault-drill-probe', {
        maxReconnectAttempts: 0,
      });
      await (await jetstreamManager(nc)).getAccountInfo();
      return;
    } catch (err) {
      last = err;
    } finally {
      await nc?.close().catch(() => undefined);
    }
    await delay(500);
  }
  throw new Error(`cluster JetStream not ready after ${timeoutMs} ms: ${last?.message ?? '?'}`);
}

/**
 * A coordinator data dir for the cluster: the mesh's credentials and callout keys (every coordinator
 * answers the auth callout), `nats.replicas: 3`, `nats.auth_callout: true`.
 */
async function coordinatorDir(run, name, credentialsFrom, extraYaml = '') {
  const dataDir = run.dir(name);
  if (credentialsFrom)
    for (const file of ['credentials.json', 'join.json', 'callout.nkey', 'callout-xkey.nkey', 'system.json'])
      await copyFile(join(credentialsFrom, file), join(dataDir, file));
  await writeFile(
    join(dataDir, 'amf.yaml'),
    `nats:\n  replicas: ${NODES}\n  auth_callout: true\n${extraYaml}`,
    { mode: 0o600 },
  );
  return dataDir;
}

/** The cluster, its first coordinator's data dir and credentials, as faults 9 and 12 start them. */
async function clusterMesh(run, { noAdvertise = false, extraYaml = '' } = {}) {
  const dataDir = await coordinatorDir(run, 'mesh', undefined, extraYaml);
  const credentials = await meshCredentials(dataDir);
  const { calloutKeyFile, loadOrCreateCalloutIssuer } = await fromDist('identity/calloutIssuer.js');
  const issuer = await loadOrCreateCalloutIssuer(calloutKeyFile(dataDir, {}));
  const { loadOrCreateSystemCredential } = await fromDist('fabric/credentials.js');
  const systemUser = await loadOrCreateSystemCredential(dataDir, {});
  const cluster = await startCluster(run, {
    dir: run.dir('cluster'),
    credentials,
    issuer,
    systemUser,
    noAdvertise,
  });
  return { dataDir, credentials, cluster };
}

/** The fault: see the file comment. Events are read live before the kill (see runFault). */
export async function clusterNodeAndCoordinator(ctx) {
  const { run, p } = ctx;
  const { dataDir, credentials, cluster } = await clusterMesh(run);
  const a = await startCoordinator(run, { dataDir, label: 'coordinator-a', natsUrl: cluster.urls });
  const bDir = await coordinatorDir(run, 'mesh-b', dataDir);
  const b = await startCoordinator(run, { dataDir: bDir, label: 'coordinator-b', natsUrl: cluster.urls });
  // Workers join with the join user and then log in with their own keys, through the callout.
  const mesh = { dataDir, coordinator: a, workers: [], credentials, nats: cluster, joinThroughCallout: true };
  await ctx.addWorkers(mesh, 2);
  await ctx.waitForModel(b.url);
  const notes = [];
  let aAlive = true;
  const victim = 0;
  // Both steps land inside the load even with --quick numbers.
  const gapMs = Math.min(p.natsShortMs, (p.requests * p.sleepMs) / p.concurrency / 4);
  const victimName = cluster.plan.nodes[victim].name;
  const records = await ctx.loadWithFault(
    // Requests alternate between the coordinators; once A is dead they all go to B, as a client
    // behind a load balancer would see it. Requests in flight on A when it dies are errors.
    (i) => (aAlive && i % 2 === 0 ? a.url : b.url),
    async () => {
      await cluster.kill(victim);
      await delay(gapMs);
      await cluster.restart(victim);
      notes.push(`node ${victimName} SIGKILLed, restarted on its store after ${gapMs / 1000} s`);
      await delay(gapMs);
      aAlive = false;
      await a.proc.kill();
      // The settle bound counts from the last fault: a result A held is redelivered to B only after
      // the results consumer's ack wait (30 s), like any dead coordinator's (fault 7).
      run.faultAt = Date.now();
      notes.push(`then coordinator A SIGKILLed; later requests go to B`);
    },
  );
  const probe = await ctx.probe(() => b.url);
  await ctx.settle(async () => cluster.urls, credentials, records);
  const events = await readEventsLive(cluster.urls, credentials);
  if (events === undefined) throw new Error('could not read AMF_EVENTS from the cluster');
  return { records, probe, events, credentials, notes };
}

/**
 * Fault 12, the partition: the same cluster (its nodes advertise no URLs to clients), coordinator A
 * on it, coordinator B on one node only and through a TCP proxy that the drill cuts for
 * `p.partitionMs` (B's connection drops and every redial is closed, as for a host cut off from the
 * LAN), then heals. Heartbeats are short enough for B to give every worker up before the heal (three
 * missed), as the tester saw in issue 28. Requests alternate between A and B throughout; the workers
 * log every run (handler.mjs), so the row also counts tasks run twice.
 */
export async function clusterPartition(ctx) {
  const { run, p } = ctx;
  const heartbeatSeconds = Math.max(1, Math.floor(p.partitionMs / 6_000));
  const heartbeat = `heartbeat:\n  interval_seconds: ${heartbeatSeconds}\n`;
  const { dataDir, credentials, cluster } = await clusterMesh(run, {
    noAdvertise: true,
    extraYaml: heartbeat,
  });
  const viaProxy = 2;
  const proxy = await startCuttableProxy(cluster.plan.nodes[viaProxy].clientPort);
  const a = await startCoordinator(run, { dataDir, label: 'coordinator-a', natsUrl: cluster.urls });
  const bDir = await coordinatorDir(run, 'mesh-b', dataDir, heartbeat);
  const b = await startCoordinator(run, {
    dataDir: bDir,
    label: 'coordinator-b',
    natsUrl: `nats://127.0.0.1:${proxy.port}`,
  });
  const runLog = join(run.logDir, 'runs.log');
  const mesh = {
    dataDir,
    coordinator: a,
    workers: [],
    credentials,
    nats: cluster,
    joinThroughCallout: true,
    runLog,
  };
  try {
    await ctx.addWorkers(mesh, 2);
    await ctx.waitForModel(b.url);
    const notes = [];
    const records = await ctx.loadWithFault(
      (i) => (i % 2 === 0 ? a.url : b.url),
      async () => {
        proxy.cut();
        await delay(p.partitionMs);
        proxy.heal();
        notes.push(
          `coordinator B cut off from the cluster ${p.partitionMs / 1000} s (heartbeats every ${heartbeatSeconds} s), then healed`,
        );
        // The settle bound counts from the heal: B's tasks wait for it.
        run.faultAt = Date.now();
      },
    );
    const probe = await ctx.probe(() => b.url);
    await ctx.settle(async () => cluster.urls, credentials, records);
    const events = await readEventsLive(cluster.urls, credentials);
    if (events === undefined) throw new Error('could not read AMF_EVENTS from the cluster');
    const runs = await readRunLog(runLog);
    notes.push(`${[...runs.values()].reduce((n, k) => n + k, 0)} handler runs`);
    return { records, probe, events, credentials, notes, runs };
  } finally {
    await proxy.close();
  }
}
