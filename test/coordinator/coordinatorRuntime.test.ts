/**
 * A coordinator started without its HTTP edge (startCoordinatorRuntime, as an embedder does) still
 * federates the admitted agents' MCP tools and forgets an agent deleted from the shared agents
 * bucket: both belong to the runtime, not to the edge.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { startCoordinatorRuntime, type CoordinatorRuntime } from '../../src/apps/coordinatorRuntime.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { connectAs } from '../../src/fabric/connect.js';
import { AGENTS_BUCKET, kvKey } from '../../src/fabric/jetstream.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';

let dataDir: string;
let runtime: CoordinatorRuntime | undefined;
let worker: RunningWorker | undefined;
let observer: NatsConnection | undefined;

/** Polls `check` until it holds or `timeoutMs` passes. */
async function waitFor<T>(check: () => T | undefined | false, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'amf-runtime-test-'));
  const config = await loadConfig({
    env: { HOME: tmpdir() },
    flags: {
      dataDir,
      logLevel: 'silent',
      coordinator: { port: 0 },
      nats: { port: 0 },
      heartbeat: { intervalSeconds: 1, offlineAfterMissed: 3 },
      mdns: { enabled: false },
    },
  });
  runtime = await startCoordinatorRuntime({ config, log: () => undefined });
  const { coordinator } = runtime;
  worker = await startWorker({
    name: 'headless-echo',
    tags: ['echo'],
    handler: echoHandler,
    natsUrl: coordinator.natsUrl,
    join: coordinator.joinCredential,
    coordinatorKey: coordinator.signingKey.publicKey,
    port: 0,
    heartbeatSeconds: 1,
  });
  const agentId = worker.worker.agentId;
  await waitFor(() => coordinator.registry.isLive(agentId), 'the worker admitted');
}, 30_000);

afterAll(async () => {
  await worker?.close(1000);
  await observer?.close();
  await runtime?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describe('a coordinator without an HTTP edge', () => {
  it('lists and calls a worker’s MCP tool through its federation', async () => {
    const tool = await waitFor(
      () => runtime!.federation.listTools().find((t) => t.name.endsWith('__echo')),
      'the echo tool federated',
    );
    const result = (await runtime!.federation.call(
      tool.name,
      { text: 'no edge needed' },
      { caller: 'runtime-test', sessionId: null },
    )) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(result.content).toContainEqual(expect.objectContaining({ text: 'no edge needed' }));
  });

  it('forgets an agent deleted from the shared agents bucket', async () => {
    const { coordinator } = runtime!;
    const agentId = worker!.worker.agentId;
    await worker!.close(1000);
    worker = undefined;
    await waitFor(() => coordinator.registry.get(agentId)?.status === 'offline', 'the worker offline');
    // Another coordinator forgetting the agent deletes its shared entry; this is that delete.
    observer = await connectAs(coordinator.natsUrl, coordinator.credentials.coordinator, 'test-forget');
    const agents = await new Kvm(observer).open(AGENTS_BUCKET);
    await agents.delete(kvKey(agentId));
    await waitFor(() => coordinator.registry.get(agentId) === undefined, 'the agent forgotten');
    expect(coordinator.registry.boundKey(agentId)).toBeUndefined();
    expect(runtime!.federation.listTools().some((t) => t.name.endsWith('__echo'))).toBe(false);
  });
});
