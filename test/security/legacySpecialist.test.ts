// The legacy shared `specialist` NATS user (issue 12): with legacy mode off, the server a
// coordinator spawns does not know it — its password opens nothing — while legacy mode (seed
// workers) and servers AMF does not spawn keep it. Real nats-server, real coordinator.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connectAs } from '../../src/fabric/connect.js';
import { ROLE_USERS } from '../../src/fabric/credentials.js';
import { renderNatsConfig } from '../../src/fabric/natsServer/config.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const serverConfig = (mesh: TestMesh) =>
  readFile(join(mesh.config.dataDir, 'nats', 'nats-server.conf'), 'utf8');
const specialistUserLine = `user: "${ROLE_USERS.specialist}"`;

describe('the legacy specialist NATS user', () => {
  const meshes: TestMesh[] = [];
  afterAll(async () => {
    await Promise.allSettled(meshes.map((m) => m.close()));
  });

  it('is not in the spawned server’s config with legacy mode off, and cannot connect', async () => {
    const mesh = await startTestMesh({ legacySpecialistUser: false });
    meshes.push(mesh);
    const text = await serverConfig(mesh);
    expect(text).not.toContain(specialistUserLine);
    expect(text).not.toContain(mesh.coordinator.credentials.specialist.password);
    // The role users the coordinator itself runs on are still there.
    expect(text).toContain(`user: "${ROLE_USERS.coordinator}"`);
    await expect(
      connectAs(mesh.coordinator.natsUrl, mesh.coordinator.credentials.specialist, 'seed-worker', {
        maxReconnectAttempts: 0,
      }),
    ).rejects.toMatchObject({ code: 'NATS_AUTH_FAILED' });
  }, 60_000);

  it('stays with legacy mode on (seed workers), and connects', async () => {
    const mesh = await startTestMesh({
      legacySpecialistUser: false,
      config: { identity: { legacyUnsignedAgents: true } },
    });
    meshes.push(mesh);
    expect(await serverConfig(mesh)).toContain(specialistUserLine);
    const nc = await connectAs(
      mesh.coordinator.natsUrl,
      mesh.coordinator.credentials.specialist,
      'seed-worker',
      {
        maxReconnectAttempts: 0,
      },
    );
    await nc.close();
  }, 60_000);

  it('stays by default in a config AMF renders for a server it does not run (external NATS, cluster)', () => {
    const credentials = Object.fromEntries(
      Object.entries(ROLE_USERS).map(([role, user]) => [role, { user, password: `pw-${role}` }]),
    ) as Parameters<typeof renderNatsConfig>[0]['credentials'];
    const base = { host: '127.0.0.1', port: -1, storeDir: '/tmp/x', credentials };
    expect(renderNatsConfig(base)).toContain(specialistUserLine);
    expect(renderNatsConfig({ ...base, specialistUser: false })).not.toContain(specialistUserLine);
  });
});
