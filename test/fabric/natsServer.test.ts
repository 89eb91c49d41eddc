import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectAs, NatsAuthError } from '../../src/fabric/connect.js';
import { JOIN_USER, loadOrCreateCredentials } from '../../src/fabric/credentials.js';
import {
  NatsPortInUseError,
  NatsServerMissingError,
  startNatsServer,
} from '../../src/fabric/natsServer/supervisor.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/** Resolves with the listening server, or rejects (EADDRINUSE) if the port is taken. */
function listenOn(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => resolve(srv));
  });
}

const closeServer = (srv: Server): Promise<void> => new Promise((resolve) => srv.close(() => resolve()));

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'amf-natsserver-test-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('startNatsServer', () => {
  it('starts on a random port, writes a private config, and is gone after close()', async () => {
    const nats: TestNats = await startTestNats();
    const { server } = nats;
    try {
      expect(server.url).toBe(`nats://127.0.0.1:${server.port}`);
      expect(server.port).toBeGreaterThan(0);
      expect(isAlive(server.pid)).toBe(true);
      expect(server.configPath).toBe(join(nats.dataDir, 'nats', 'nats-server.conf'));
      expect((await stat(server.configPath)).mode & 0o777).toBe(0o600);
      const config = await readFile(server.configPath, 'utf8');
      expect(config).toContain(`store_dir: "${join(nats.dataDir, 'nats')}"`);
      expect(config).toContain('max_payload: 1048576');
      const nc = await nats.connect('specialist');
      expect(nc.info?.max_payload).toBe(1048576);
    } finally {
      await nats.close();
    }
    expect(isAlive(server.pid)).toBe(false);
    const probe = await listenOn(server.port);
    await closeServer(probe);
    await server.close(); // idempotent
  });

  it('has JetStream enabled for the coordinator', async () => {
    const nats = await startTestNats();
    try {
      const jsm = await jetstreamManager(await nats.connect('coordinator'));
      const info = await jsm.getAccountInfo();
      expect(info.streams).toBe(0);
      await jsm.streams.add({ name: 'PROBE', subjects: ['probe.>'] });
      expect((await jsm.getAccountInfo()).streams).toBe(1);
      // store_dir is <dataDir>/nats; the server keeps its files in <store_dir>/jetstream
      expect((await stat(join(nats.dataDir, 'nats', 'jetstream'))).isDirectory()).toBe(true);
    } finally {
      await nats.close();
    }
  });

  it('gives NatsServerMissingError with the install command when the binary is missing', async () => {
    const credentials = await loadOrCreateCredentials(join(root, 'missing'), {});
    for (const binary of ['/nonexistent/nats-server', 'amf-no-such-nats-server']) {
      const err = await startNatsServer({ dataDir: join(root, 'missing'), credentials, binary }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(NatsServerMissingError);
      expect((err as NatsServerMissingError).code).toBe('NATS_SERVER_MISSING');
      expect((err as Error).message).toContain('apt-get install -y nats-server');
      expect((err as Error).message).toContain('go install github.com/nats-io/nats-server/v2@latest');
      expect((err as Error).message).toContain(binary);
    }
  });

  it('says in one line that the port is taken, keeping the server output in details', async () => {
    const blocker = await listenOn(0);
    const address = blocker.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      const dataDir = join(root, 'busy');
      const credentials = await loadOrCreateCredentials(dataDir, {});
      const err = await startNatsServer({ dataDir, credentials, port }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NatsPortInUseError);
      const message = (err as NatsPortInUseError).message;
      expect(message).not.toContain('\n');
      expect(message).toContain(`127.0.0.1:${port}`);
      expect(message).toContain('--nats-port');
      // The holder is named: here this very test process.
      expect(message).toContain(`(pid ${process.pid}`);
      expect(String((err as NatsPortInUseError).details?.output)).toContain('address already in use');
    } finally {
      await closeServer(blocker);
    }
  });

  it('names the running AMF instance (its data dir) when another mesh holds the NATS port', async () => {
    const firstDir = join(root, 'first-instance');
    const first = await startNatsServer({
      dataDir: firstDir,
      credentials: await loadOrCreateCredentials(firstDir, {}),
    });
    try {
      const secondDir = join(root, 'second-instance');
      const credentials = await loadOrCreateCredentials(secondDir, {});
      const err = await startNatsServer({ dataDir: secondDir, credentials, port: first.port }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(NatsPortInUseError);
      const message = (err as Error).message;
      expect(message).not.toContain('\n');
      expect(message).toContain(
        `in use by the nats-server of the AMF mesh with data dir ${firstDir} (pid ${first.pid})`,
      );
      expect(message).toContain('--nats-port');
    } finally {
      await first.close();
    }
  });

  it('accepts passwords with quotes, backslashes, $ and dashes, and refuses wrong ones clearly', async () => {
    const dataDir = join(root, 'quoting');
    const credentials = await loadOrCreateCredentials(dataDir, {
      AMF_COORD_PASS: 'a"b\\c$HOME-_x',
      AMF_SPECIALIST_PASS: "it's {a} [b] #c // d",
    });
    const server = await startNatsServer({ dataDir, credentials });
    try {
      const coord = await connectAs(server.url, credentials.coordinator, 'quoting-coord');
      const spec = await connectAs(server.url, credentials.specialist, 'quoting-spec');
      await Promise.all([coord.close(), spec.close()]);

      const wrong = { user: 'amf-watcher', password: 'not-the-password' };
      const err = await connectAs(server.url, wrong, 'wrong', { maxReconnectAttempts: 0 }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(NatsAuthError);
      expect((err as NatsAuthError).code).toBe('NATS_AUTH_FAILED');
      expect((err as Error).message).toContain(`NATS at ${server.url} refused user "amf-watcher"`);
    } finally {
      await server.close();
    }
  });

  it('folds user changes that arrive before a reload starts into it, and the newest set wins', async () => {
    const dataDir = join(root, 'reloads');
    const credentials = await loadOrCreateCredentials(dataDir, {});
    const lines: string[] = [];
    const server = await startNatsServer({ dataDir, credentials, logger: (line) => lines.push(line) });
    try {
      const joinUser = (n: number) => ({ user: JOIN_USER, password: `join-password-${n}` });
      const reloadsBefore = lines.filter((l) => /Reloaded server configuration/.test(l)).length;
      await Promise.all([1, 2, 3, 4].map((n) => server.reloadUsers({ join: joinUser(n) })));
      const reloads = lines.filter((l) => /Reloaded server configuration/.test(l)).length - reloadsBefore;
      // All four arrive before the first reload starts: they share it.
      expect(reloads).toBe(1);
      const joined = await connectAs(server.url, joinUser(4), 'reloads-newest');
      await joined.close();
      const stale = await connectAs(server.url, joinUser(2), 'reloads-stale', {
        maxReconnectAttempts: 0,
      }).catch((e: unknown) => e);
      expect(stale).toBeInstanceOf(NatsAuthError);
    } finally {
      await server.close();
    }
  });

  it('lets an existing user in while its users are being reloaded over and over', async () => {
    const dataDir = join(root, 'reload-storm');
    const credentials = await loadOrCreateCredentials(dataDir, {});
    const server = await startNatsServer({ dataDir, credentials });
    try {
      let storming = true;
      let reloads = 0;
      const storm = (async () => {
        while (storming) {
          await server.reloadUsers({ join: { user: JOIN_USER, password: `storm-${reloads}` } });
          reloads++;
        }
      })();
      // nats-server turns logins away while it swaps its users; connectAs tries a refusal again.
      // At least 8 logins, and on until 8 reloads happened among them (whichever takes longer).
      for (let i = 0; i < 40 && (i < 8 || reloads < 8); i++) {
        const nc = await connectAs(server.url, credentials.coordinator, `storm-${i}`, {
          maxReconnectAttempts: 0,
        });
        await nc.close();
      }
      storming = false;
      await storm;
      expect(reloads).toBeGreaterThanOrEqual(8);
    } finally {
      await server.close();
    }
  }, 120_000);
});
