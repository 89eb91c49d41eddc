/**
 * Auth callout on a real 3-node cluster (nats-server 2.12, configs of scripts/cluster.sh with the
 * callout on): the coordinator is attached to node 1 only, so logins on nodes 2 and 3 reach it over
 * the routes. A worker joining through node 3 is admitted and works; with its key it logs in on every
 * node and is held to its tag there; an unknown key is refused on every node. Once it leaves, its
 * connections on every node are closed through the system account, long before its JWT expires.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstream } from '@nats-io/jetstream';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { loadConfig } from '../../src/config/config.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import { calloutKeyFile, loadOrCreateCalloutIssuer } from '../../src/identity/calloutIssuer.js';
import { connectAsAgent, NatsAuthError } from '../../src/fabric/connect.js';
import { loadOrCreateCredentials, loadOrCreateSystemCredential } from '../../src/fabric/credentials.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { startTestCluster, type TestCluster } from '../helpers/natsCluster.js';

describe('auth callout on a 3-node cluster', () => {
  let dataDir: string;
  let cluster: TestCluster;
  let coordinator: Coordinator;
  let worker: RunningWorker | undefined;
  const key = createEphemeralAgentKey();
  const nodeUrl = (i: number): string => `nats://127.0.0.1:${cluster.plan.nodes[i]!.clientPort}`;

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'amf-callout-cluster-'));
    const credentials = await loadOrCreateCredentials(dataDir, {});
    const issuer = await loadOrCreateCalloutIssuer(calloutKeyFile(dataDir, {}));
    cluster = await startTestCluster(credentials, 3, {
      calloutIssuer: issuer.publicKey,
      calloutXkey: issuer.xkeyPublicKey,
      systemUser: await loadOrCreateSystemCredential(dataDir, {}),
    });
    const config = await loadConfig({
      env: { HOME: tmpdir() },
      flags: {
        dataDir,
        logLevel: 'silent',
        coordinator: { port: 0 },
        // auth_callout left at null: on because the data dir holds callout.nkey (as after cluster.sh).
        nats: { url: nodeUrl(0), authCalloutTtlSeconds: 600 },
        heartbeat: { intervalSeconds: 1, offlineAfterMissed: 3 },
        mdns: { enabled: false },
      },
    });
    coordinator = await Coordinator.start({ config, env: { HOME: tmpdir() } });
  }, 90_000);

  afterAll(async () => {
    await worker?.close(5000);
    await coordinator?.close();
    await cluster?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('admits a worker joining through another node and lets it work with its own key', async () => {
    worker = await startWorker({
      name: 'cluster-callout',
      tags: ['alpha'],
      handler: echoHandler,
      natsUrl: nodeUrl(2),
      join: coordinator.joinCredential,
      key,
      port: 0,
      heartbeatSeconds: 1,
    });
    const deadline = Date.now() + 30_000;
    while (!coordinator.registry.isLive(worker.worker.agentId)) {
      if (Date.now() > deadline) throw new Error('the worker was not admitted');
      await new Promise((r) => setTimeout(r, 50));
    }
    const answer = await coordinator.dispatcher.submit({
      tag: 'alpha',
      task: 'via node 3',
      timeoutMs: 30_000,
    });
    expect(answer.text).toBe('via node 3');
  });

  it('holds the agent to its tag on every node and refuses an unknown key on every node', async () => {
    for (let i = 0; i < 3; i++) {
      const nc = await connectAsAgent(nodeUrl(i), key, `probe-${i}`, { maxReconnectAttempts: 0 });
      try {
        const js = jetstream(nc, { timeout: 5_000 });
        expect((await (await js.consumers.get('AMF_WORK', 'workers_alpha')).info()).name).toBe(
          'workers_alpha',
        );
        await expect(
          js.consumers.get('AMF_WORK', 'workers_beta').then((c) => c.next({ expires: 1_000 })),
        ).rejects.toThrow(/Permissions Violation for Publish/);
      } finally {
        await nc.close();
      }
      await expect(
        connectAsAgent(nodeUrl(i), createEphemeralAgentKey(), `stranger-${i}`, { maxReconnectAttempts: 0 }),
      ).rejects.toBeInstanceOf(NatsAuthError);
    }
  });

  it('closes the departed agent’s connections on every node, not only on its coordinator’s', async () => {
    const probes = await Promise.all(
      [0, 1, 2].map((i) => connectAsAgent(nodeUrl(i), key, `kick-probe-${i}`, { maxReconnectAttempts: 0 })),
    );
    const ended = probes.map(() => false);
    probes.forEach((nc, i) => void nc.closed().then(() => (ended[i] = true)));
    const agentId = worker!.worker.agentId;
    await worker!.close(5000);
    worker = undefined;
    // The JWTs live 600 s: connections closed within seconds were kicked.
    const deadline = Date.now() + 20_000;
    while (coordinator.registry.isLive(agentId) || ended.includes(false)) {
      if (Date.now() > deadline) throw new Error(`not kicked: ${JSON.stringify(ended)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(ended).toEqual([true, true, true]);
  });
});
