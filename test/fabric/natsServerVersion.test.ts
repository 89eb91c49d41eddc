/**
 * The warning about nats-server releases whose file store slows a long-running mesh: parsed from
 * real servers' INFO (Debian's on PATH and the pinned one scripts/install-nats.sh builds).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { connectAs } from '../../src/fabric/connect.js';
import { loadOrCreateCredentials } from '../../src/fabric/credentials.js';
import { startNatsServer, type NatsServerHandle } from '../../src/fabric/natsServer/supervisor.js';
import {
  compareVersions,
  parseServerVersion,
  slowStoreWarning,
  STEADY_FILESTORE_SINCE,
} from '../../src/fabric/natsServer/version.js';
import { warnIfSlowNatsServer } from '../../src/coordinator/coordinatorEvents.js';
import { clusterNatsBinary } from '../helpers/natsCluster.js';

describe('nats-server versions', () => {
  it('reads the version from --version output and from INFO', () => {
    expect(parseServerVersion('nats-server: v2.9.10')).toEqual([2, 9, 10]);
    expect(parseServerVersion('2.12.15')).toEqual([2, 12, 15]);
    expect(parseServerVersion('nats-server: unknown')).toBeUndefined();
    expect(parseServerVersion(undefined)).toBeUndefined();
  });

  it('warns about releases before 2.10 only, naming the fix', () => {
    expect(slowStoreWarning([2, 9, 10])).toMatch(
      /nats-server 2\.9\.10 slows down.*scripts\/install-nats\.sh/,
    );
    expect(slowStoreWarning([2, 10, 0])).toBeUndefined();
    expect(slowStoreWarning([2, 12, 15])).toBeUndefined();
  });
});

describe('warnIfSlowNatsServer, against real servers', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function warningsFrom(binary: string): Promise<{ version: number[]; warnings: string[] }> {
    const dataDir = await mkdtemp(join(tmpdir(), 'amf-nats-version-'));
    cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
    const credentials = await loadOrCreateCredentials(dataDir, {});
    const server: NatsServerHandle = await startNatsServer({ dataDir, credentials, binary });
    cleanups.push(() => server.close());
    const nc = await connectAs(server.url, credentials.coordinator, 'test-version', {
      maxReconnectAttempts: 0,
    });
    cleanups.push(() => nc.close());
    const warnings: string[] = [];
    warnIfSlowNatsServer(nc, (level, message) => {
      if (level === 'warn') warnings.push(message);
    });
    return { version: parseServerVersion(nc.info?.version)!, warnings };
  }

  it('says nothing for the pinned nats-server (2.10 or newer)', async () => {
    const { version, warnings } = await warningsFrom(await clusterNatsBinary());
    expect(compareVersions(version, STEADY_FILESTORE_SINCE)).toBeGreaterThanOrEqual(0);
    expect(warnings).toEqual([]);
  });

  it('warns once for the nats-server on PATH exactly when it is older than 2.10', async () => {
    const { version, warnings } = await warningsFrom('nats-server');
    const old = compareVersions(version, STEADY_FILESTORE_SINCE) < 0;
    expect(warnings).toEqual(old ? [slowStoreWarning(version)] : []);
  });
});
