// A revoked agent on an external NATS is cut at once, not at its user JWT's expiry (issue 12): a real
// nats-server 2.12 configured as scripts/cluster.sh configures a node (auth callout, and a `$SYS`
// user in system.json), a real coordinator answering the callout with a 10-minute JWT lifetime,
// real workers. Once an agent is no longer live, every connection logged in with its key is closed
// by the server within seconds, and its reconnect is refused; other agents' connections stay.
import { spawn } from 'node:child_process';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsConnection } from '@nats-io/transport-node';
import { loadConfig } from '../../src/config/config.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { connectAs, connectAsAgent, NatsAuthError } from '../../src/fabric/connect.js';
import { SYSTEM_FILE, SYSTEM_USER, readSystemCredentialIfPresent } from '../../src/fabric/credentials.js';
import { createEphemeralAgentKey, loadOrCreateAgentKey, type AgentKey } from '../../src/identity/agentKey.js';
import { startCalloutNats, type CalloutNats } from '../helpers/calloutNats.js';
import { waitFor } from '../helpers/waitFor.js';

// The built CLI (dist/ must be current: npm run build), as in test/fabric/supervisedFabric.test.ts.
const AMF_BIN = fileURLToPath(new URL('../../bin/amf.js', import.meta.url));

describe('revoked agents on an external NATS are kicked through the system account', () => {
  let dataDir: string;
  let nats: CalloutNats;
  let coordinator: Coordinator;
  const workers: RunningWorker[] = [];
  const probes: NatsConnection[] = [];

  const joinAs = async (name: string, tag: string, key: AgentKey): Promise<RunningWorker> => {
    const w = await startWorker({
      name,
      tags: [tag],
      handler: echoHandler,
      natsUrl: nats.url,
      join: coordinator.joinCredential,
      key,
      port: 0,
      heartbeatSeconds: 1,
    });
    workers.push(w);
    await waitFor(() => coordinator.registry.isLive(w.worker.agentId), `${name} admitted`);
    return w;
  };

  /** A second connection with the agent's key that does not reconnect: its end is observable. */
  const probe = async (
    key: AgentKey,
    name: string,
  ): Promise<{ nc: NatsConnection; ended: () => boolean }> => {
    const nc = await connectAsAgent(nats.url, key, name, { maxReconnectAttempts: 0 });
    probes.push(nc);
    let ended = false;
    void nc.closed().then(() => {
      ended = true;
    });
    return { nc, ended: () => ended };
  };

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'amf-kick-test-'));
    nats = await startCalloutNats(dataDir, { specialistUser: false, systemUser: true });
    const config = await loadConfig({
      env: { HOME: tmpdir() },
      flags: {
        dataDir,
        logLevel: 'silent',
        coordinator: { port: 0 },
        // Ten minutes: any cut seen within the test's seconds is the kick, not the JWT's expiry.
        nats: { url: nats.url, authCallout: true, authCalloutTtlSeconds: 600 },
        heartbeat: { intervalSeconds: 1, offlineAfterMissed: 3 },
        mdns: { enabled: false },
      },
    });
    coordinator = await Coordinator.start({ config, env: { HOME: tmpdir() } });
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(workers.map((w) => w.close(5000)));
    await Promise.allSettled(probes.map((c) => c.close()));
    await coordinator?.close();
    await nats?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('keeps the system user in its own owner-only file, which a worker never reads', async () => {
    const file = join(dataDir, SYSTEM_FILE);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const system = await readSystemCredentialIfPresent(dataDir, {});
    expect(system?.user).toBe(SYSTEM_USER);
    // The join credential a worker holds is not the system user, and cannot log in as it.
    expect(coordinator.joinCredential.user).not.toBe(SYSTEM_USER);
    await expect(
      connectAs(nats.url, { user: SYSTEM_USER, password: coordinator.joinCredential.password }, 'guess', {
        maxReconnectAttempts: 0,
      }),
    ).rejects.toBeInstanceOf(NatsAuthError);
  });

  it('closes every connection of an agent that said goodbye, refuses it back, and leaves others alone', async () => {
    const goneKey = createEphemeralAgentKey();
    const stayKey = createEphemeralAgentKey();
    const gone = await joinAs('kick-gone', 'kappa', goneKey);
    await joinAs('kick-stays', 'lambda', stayKey);
    const goneProbe = await probe(goneKey, 'gone-probe');
    const stayProbe = await probe(stayKey, 'stay-probe');

    await gone.close(5000);
    workers.splice(workers.indexOf(gone), 1);
    await waitFor(() => !coordinator.registry.isLive(gone.worker.agentId), 'the agent offline');
    // Well inside the 600 s JWT: only the kick can have closed it.
    await waitFor(() => goneProbe.ended(), 'the revoked agent’s connection closed', 10_000);
    await expect(
      connectAsAgent(nats.url, goneKey, 'gone-again', { maxReconnectAttempts: 0 }),
    ).rejects.toBeInstanceOf(NatsAuthError);

    // The agent still admitted keeps its connection and can still use it.
    expect(stayProbe.ended()).toBe(false);
    await stayProbe.nc.flush();
    expect(stayProbe.nc.isClosed()).toBe(false);
  });

  it('cuts an agent whose process is stopped (SIGSTOP) once it misses its heartbeats', async () => {
    // A real worker process, joined through the data dir's join.json with its own key, beating
    // every second (its amf.yaml; the coordinator took its settings from flags).
    await writeFile(join(dataDir, 'amf.yaml'), 'heartbeat:\n  interval_seconds: 1\n');
    const child = spawn(
      process.execPath,
      [AMF_BIN, 'worker', '--data-dir', dataDir, '--name', 'kick-stopped', '--tags', 'mu'].concat([
        '--nats-url',
        nats.url,
        '--no-mdns',
        '--port',
        '0',
      ]),
      { env: { PATH: process.env.PATH ?? '', HOME: dataDir }, stdio: 'ignore' },
    );
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    try {
      const agent = await waitFor(
        () =>
          coordinator.registry
            .list()
            .find((a) => a.record.capability_tags?.includes('mu') === true && a.status === 'live'),
        'the worker process admitted',
        30_000,
      );
      const key = await loadOrCreateAgentKey(join(dataDir, 'agents', 'kick-stopped', 'agent.nkey'));
      expect(key.publicKey).toBe(agent.record.nkey);
      const stoppedProbe = await probe(key, 'stopped-probe');
      child.kill('SIGSTOP');
      await waitFor(() => !coordinator.registry.isLive(agent.record.agent_id), 'the agent offline', 15_000);
      // The stopped process cannot say goodbye; its key's other connection is closed by the server.
      await waitFor(() => stoppedProbe.ended(), 'the stopped agent’s connection closed', 10_000);
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
  }, 60_000);
});
