// An agent id is bound to the key it was first admitted with (issue 12): while the agent is offline
// and across a coordinator restart (the binding lives in the agents' KV entries), an advertisement
// of that id with another key is refused and warned; once the operator forgets the agent, the next
// key is admitted (the key rotation path). Real nats-server, real OPA, real workers joining through
// the join door, a real restart on the same data dir.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsConnection } from '@nats-io/transport-node';
import { loadConfig, type AmfConfig } from '../../src/config/config.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import type { AmfEvent } from '../../src/events/cloudEvent.js';
import { connectAs } from '../../src/fabric/connect.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { startCoordinatorHttp, type CoordinatorHttp } from '../../src/apps/coordinatorApp.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';

const API_KEY = 'binding-key';

/** A coordinator with its HTTP edge and a recorder of policy warnings. */
interface Running {
  coordinator: Coordinator;
  http: CoordinatorHttp;
  observer: NatsConnection;
  warnings: Array<Record<string, unknown>>;
}

async function startRunning(config: AmfConfig): Promise<Running> {
  const coordinator = await Coordinator.start({ config });
  const http = await startCoordinatorHttp(coordinator);
  const observer = await connectAs(coordinator.natsUrl, coordinator.credentials.coordinator, 'observer');
  const warnings: Array<Record<string, unknown>> = [];
  observer.subscribe('amf.policy.warning', {
    callback: (err, msg) => {
      if (!err) warnings.push(msg.json<AmfEvent>().data.payload as Record<string, unknown>);
    },
  });
  await observer.flush();
  return { coordinator, http, observer, warnings };
}

async function stopRunning(r: Running | undefined): Promise<void> {
  if (!r) return;
  await r.observer.close();
  await r.http.close();
  await r.coordinator.close();
}

async function waitFor<T>(check: () => T | undefined | false, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('an agent id stays bound to its first key until the operator forgets it', () => {
  let dataDir: string;
  let config: AmfConfig;
  let running: Running | undefined;
  const workers: RunningWorker[] = [];
  const firstKey = createEphemeralAgentKey();
  const secondKey = createEphemeralAgentKey();

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'amf-key-binding-'));
    config = await loadConfig({
      env: { HOME: tmpdir() },
      flags: {
        dataDir,
        logLevel: 'silent',
        coordinator: { port: 0, apiKey: API_KEY },
        nats: { port: 0 },
        heartbeat: { intervalSeconds: 1, offlineAfterMissed: 3 },
        mdns: { enabled: false },
      },
    });
    running = await startRunning(config);
  });
  afterAll(async () => {
    await Promise.allSettled(workers.map((w) => w.close(2000)));
    await stopRunning(running);
    await rm(dataDir, { recursive: true, force: true });
  });

  const roamer = async (key: typeof firstKey, admissionTimeoutMs?: number) => {
    const w = await startWorker({
      name: 'roamer',
      tags: ['roam'],
      handler: echoHandler,
      natsUrl: running!.coordinator.natsUrl,
      join: running!.coordinator.joinCredential,
      port: 0,
      heartbeatSeconds: 1,
      key,
      ...(admissionTimeoutMs !== undefined ? { admissionTimeoutMs } : {}),
    });
    workers.push(w);
    return w;
  };
  /** A worker with `key` is refused: it never gets its NATS user, and the coordinator warns. */
  const refused = async (key: typeof firstKey, agentId: string) => {
    // It heartbeats until its admission deadline: on a loaded machine the first heartbeats may come
    // late or be rate-limited right after the bound agent's goodbye, so it gets a few seconds.
    const start = roamer(key, 12_000);
    const warning = await waitFor(
      () =>
        running!.warnings.find(
          (w) =>
            w.reason === 'agent_key_mismatch' &&
            w.agent_id === `key ${key.publicKey}` &&
            (w.details as { claimed_agent?: string }).claimed_agent === agentId,
        ),
      `agent_key_mismatch for ${key.publicKey}`,
      30_000,
    );
    expect(String(warning.message)).toContain(`amf agents forget ${agentId}`);
    await expect(start).rejects.toThrow();
    expect(running!.coordinator.registry.get(agentId)?.record.nkey).not.toBe(key.publicKey);
    expect(running!.coordinator.registry.isLive(agentId)).toBe(false);
  };

  it('refuses a new key while the agent is offline, after a restart too, and takes it once forgotten', async () => {
    const first = await roamer(firstKey);
    const id = first.worker.agentId;
    await waitFor(() => running!.coordinator.registry.isLive(id), 'first admission');
    await first.close(2000);
    await waitFor(() => running!.coordinator.registry.get(id)?.status === 'offline', 'offline');

    // Offline: the id is still bound to the first key.
    expect(running!.coordinator.registry.boundKey(id)).toBe(firstKey.publicKey);
    await refused(secondKey, id);

    // A restart on the same data dir: the binding comes back from the agents' KV entries.
    await stopRunning(running);
    running = undefined;
    running = await startRunning(config);
    expect(running.coordinator.registry.boundKey(id)).toBe(firstKey.publicKey);
    await refused(secondKey, id);

    // The operator forgets the agent: the id is unbound, and the new key is admitted (rotation).
    const forget = await fetch(`${running.http.url}/agents/${encodeURIComponent(id)}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(forget.status).toBe(200);
    expect(running.coordinator.registry.boundKey(id)).toBeUndefined();
    const rotated = await roamer(secondKey);
    await waitFor(() => running!.coordinator.registry.isLive(id), 'admission with the new key');
    expect(running.coordinator.registry.boundKey(id)).toBe(secondKey.publicKey);
    const answer = await running.coordinator.dispatcher.submit({
      tag: 'roam',
      task: 'hi',
      timeoutMs: 10_000,
    });
    expect(answer.text).toContain('hi');

    // And now the old key is the stranger.
    await rotated.close(2000);
    await waitFor(() => running!.coordinator.registry.get(id)?.status === 'offline', 'offline again');
    await refused(firstKey, id);
  }, 180_000);
});
