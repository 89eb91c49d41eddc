/**
 * A real nats-server per test file (random port, temp data dir), with role connections that are
 * all closed, together with the server and the temp dir, by one close() call.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectAs, type NatsConnection } from '../../src/fabric/connect.js';
import {
  loadOrCreateCredentials,
  type NatsCredentials,
  type NatsRole,
} from '../../src/fabric/credentials.js';
import { startNatsServer, type NatsServerHandle } from '../../src/fabric/natsServer/supervisor.js';

/** What {@link startTestNats} gives a test. */
export interface TestNats {
  url: string;
  dataDir: string;
  credentials: NatsCredentials;
  server: NatsServerHandle;
  /** Connects as `role`; the connection is closed by close(). */
  connect(role: NatsRole, name?: string): Promise<NatsConnection>;
  close(): Promise<void>;
}

/**
 * Starts an isolated server with freshly generated credentials. The environment's AMF_*_PASS
 * variables are ignored so a developer's shell cannot change what the tests see. `binary`: another
 * nats-server than the one on PATH (e.g. the pinned 2.12 of the cluster tests).
 */
export async function startTestNats(options: { binary?: string } = {}): Promise<TestNats> {
  const dataDir = await mkdtemp(join(tmpdir(), 'amf-nats-test-'));
  let server: NatsServerHandle | undefined;
  try {
    const credentials = await loadOrCreateCredentials(dataDir, {});
    server = await startNatsServer({
      dataDir,
      credentials,
      ...(options.binary !== undefined ? { binary: options.binary } : {}),
    });
    const started = server;
    const connections: NatsConnection[] = [];
    let closing: Promise<void> | undefined;
    return {
      url: started.url,
      dataDir,
      credentials,
      server: started,
      async connect(role, name = `test-${role}`) {
        const nc = await connectAs(started.url, credentials[role], name, { maxReconnectAttempts: 0 });
        connections.push(nc);
        return nc;
      },
      close() {
        closing ??= (async () => {
          await Promise.allSettled(connections.map((nc) => nc.close()));
          await started.close();
          await rm(dataDir, { recursive: true, force: true });
        })();
        return closing;
      },
    };
  } catch (err) {
    await server?.close();
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
}
