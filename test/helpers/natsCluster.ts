/**
 * A real 3-node NATS JetStream cluster for a test file: configs from
 * src/fabric/natsServer/cluster.ts (the renderer scripts/cluster.sh uses), each node its own
 * process and store dir, random loopback ports. Nodes can be SIGKILLed and restarted on the same
 * store dir. The binary is the pinned newer nats-server of scripts/install-nats.sh: Debian's 2.9 is
 * not what clustered JetStream is tested on.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { constants } from 'node:fs';
import { access, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { jetstreamManager } from '@nats-io/jetstream';
import { connectAs } from '../../src/fabric/connect.js';
import type { NatsCredentials, RoleCredential } from '../../src/fabric/credentials.js';
import {
  clusterClientUrls,
  planCluster,
  renderClusterNodeConfig,
  type ClusterPlan,
} from '../../src/fabric/natsServer/cluster.js';
import { freePort } from '../../scripts/lib/freePort.mjs';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

/** What a cluster test gets. */
export interface TestCluster {
  plan: ClusterPlan;
  /** Comma-separated client URLs of every node (what `--nats-url` takes). */
  urls: string;
  /** Sends SIGKILL to node `index` and waits until the process is gone. */
  kill(index: number): Promise<void>;
  /** Starts node `index` again on its store dir and waits until it accepts clients. */
  restart(index: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * The nats-server the cluster tests run on: `$AMF_NATS_CLUSTER_BIN` (scripts/provision.sh writes it),
 * else where scripts/install-nats.sh installs its pinned version. Missing = a clear failure, never
 * a skip: these tests are how we know the mesh survives a node loss.
 */
export async function clusterNatsBinary(): Promise<string> {
  const fromEnv = process.env.AMF_NATS_CLUSTER_BIN;
  let binary = fromEnv;
  if (binary === undefined || binary === '') {
    const script = await readFile(join(REPO, 'scripts', 'install-nats.sh'), 'utf8');
    const version = /NATS_SERVER_VERSION="\$\{AMF_NATS_SERVER_VERSION:-(v[0-9.]+)\}"/.exec(script)?.[1];
    if (version === undefined) throw new Error('cannot read the pinned version from scripts/install-nats.sh');
    const cache = process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache');
    binary = join(process.env.AMF_CACHE_DIR ?? join(cache, 'amf'), `nats-server-${version}`, 'nats-server');
  }
  try {
    await access(binary, constants.X_OK);
  } catch {
    throw new Error(
      `the cluster tests need a nats-server >= 2.10 at ${binary}, which is missing: ` +
        'run scripts/install-nats.sh (or set AMF_NATS_CLUSTER_BIN to such a binary)',
    );
  }
  const { stdout } = await promisify(execFile)(binary, ['--version']);
  const m = /v(\d+)\.(\d+)\./.exec(stdout);
  if (!m || Number(m[1]) < 2 || (Number(m[1]) === 2 && Number(m[2]) < 10)) {
    throw new Error(
      `${binary} is ${stdout.trim()}; the cluster tests need >= 2.10: run scripts/install-nats.sh`,
    );
  }
  return binary;
}

async function poll<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${last instanceof Error ? `: ${last.message}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Starts a 3-node cluster and waits until JetStream answers (a meta leader is elected). With
 * `calloutIssuer` the nodes send every login but the role users' to the coordinators (auth callout).
 */
export async function startTestCluster(
  credentials: NatsCredentials,
  nodes = 3,
  options: {
    calloutIssuer?: string;
    calloutXkey?: string;
    systemUser?: RoleCredential;
    /**
     * The nodes do not tell clients the other nodes' URLs (`no_advertise`): a client given one URL
     * stays on that node, as one cut off behind a proxy must (test/helpers/cuttableProxy.ts).
     */
    noAdvertise?: boolean;
  } = {},
): Promise<TestCluster> {
  const binary = await clusterNatsBinary();
  const dir = await mkdtemp(join(tmpdir(), 'amf-cluster-test-'));
  const ports: number[] = [];
  while (ports.length < nodes * 2) {
    const p = await freePort();
    if (!ports.includes(p)) ports.push(p);
  }
  const plan = planCluster({ dir, clientPorts: ports.slice(0, nodes), routePorts: ports.slice(nodes) });
  const children: (ChildProcess | undefined)[] = [];
  const logs: string[][] = plan.nodes.map(() => []);
  const urls = clusterClientUrls(plan);
  // A test worker that dies without close() must not leave nodes behind.
  const killAll = (): void => {
    for (const c of children) c?.kill('SIGKILL');
  };
  process.once('exit', killAll);

  const startNode = async (i: number): Promise<void> => {
    const node = plan.nodes[i];
    if (!node) throw new Error(`no node ${i}`);
    await mkdir(node.storeDir, { recursive: true });
    const conf = join(node.storeDir, 'nats-server.conf');
    let text = renderClusterNodeConfig(plan, i, credentials, options);
    if (options.noAdvertise) text = text.replace(/^cluster \{$/m, 'cluster {\n  no_advertise: true');
    await writeFile(conf, text, { mode: 0o600 });
    const child = spawn(binary, ['-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (b: Buffer): void => {
      const log = logs[i] as string[];
      log.push(b.toString());
      if (log.length > 50) log.shift();
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    children[i] = child;
    const url = `nats://127.0.0.1:${node.clientPort}`;
    await poll(
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`node ${node.name} exited:\n${(logs[i] as string[]).join('')}`);
        }
        const nc = await connectAs(url, credentials.coordinator, 'cluster-probe', {
          maxReconnectAttempts: 0,
        });
        await nc.close();
        return true;
      },
      20_000,
      `node ${node.name} to accept clients`,
    );
  };

  const stopNode = async (i: number, signal: NodeJS.Signals): Promise<void> => {
    const child = children[i];
    children[i] = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((r) => child.once('close', () => r()));
    child.kill(signal);
    await gone;
  };

  const close = async (): Promise<void> => {
    await Promise.all(plan.nodes.map((_, i) => stopNode(i, 'SIGTERM')));
    process.removeListener('exit', killAll);
    await rm(dir, { recursive: true, force: true });
  };

  try {
    await Promise.all(plan.nodes.map((_, i) => startNode(i)));
    const nc = await connectAs(urls, credentials.coordinator, 'cluster-ready');
    try {
      // jetstreamManager() itself asks JetStream for account info, which fails until a meta leader exists.
      await poll(
        async () => (await jetstreamManager(nc)).getAccountInfo(),
        30_000,
        'the JetStream meta leader',
      );
    } finally {
      await nc.close();
    }
  } catch (err) {
    await close();
    throw err;
  }

  return {
    plan,
    urls,
    kill: (i) => stopNode(i, 'SIGKILL'),
    restart: (i) => startNode(i),
    close,
  };
}
