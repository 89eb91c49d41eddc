/**
 * Cluster configs and the replicas setting, without starting servers (test/cluster runs them):
 * routes carry the derived route secret, every node has the single server's users and ACLs, and
 * `nats.replicas` is validated before anything is created with it.
 */
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { natsServers } from '../../src/fabric/connect.js';
import {
  loadOrCreateCredentials,
  loadOrCreateSystemCredential,
  SYSTEM_FILE,
  SYSTEM_USER,
  type NatsCredentials,
} from '../../src/fabric/credentials.js';
import {
  clusterClientUrls,
  planCluster,
  renderClusterNodeConfig,
  routePassword,
  ROUTE_USER,
} from '../../src/fabric/natsServer/cluster.js';
import { renderNatsConfig } from '../../src/fabric/natsServer/config.js';

let dir: string;
let credentials: NatsCredentials;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'amf-cluster-conf-'));
  credentials = await loadOrCreateCredentials(dir, {});
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('cluster configs', () => {
  const plan = (): ReturnType<typeof planCluster> =>
    planCluster({ dir: '/srv/amf', clientPorts: [4222, 4223, 4224], routePorts: [6222, 6223, 6224] });

  it('gives each node its name, store dir and routes to the two others, with the route secret', () => {
    const text = renderClusterNodeConfig(plan(), 1, credentials);
    const secret = routePassword(credentials);
    expect(text).toContain('server_name: "amf-n2"');
    expect(text).toContain('store_dir: "/srv/amf/amf-n2"');
    expect(text).toContain('port: 4223');
    expect(text).toContain(`authorization { user: "${ROUTE_USER}", password: "${secret}" }`);
    expect(text).toContain(
      `routes: ["nats-route://${ROUTE_USER}:${secret}@127.0.0.1:6222", "nats-route://${ROUTE_USER}:${secret}@127.0.0.1:6224"]`,
    );
  });

  it('keeps the single server users and ACLs on every node', () => {
    const single = renderNatsConfig({ host: '127.0.0.1', port: 4222, storeDir: '/x', credentials });
    const users = single.slice(single.indexOf('authorization {'));
    for (let i = 0; i < 3; i++) expect(renderClusterNodeConfig(plan(), i, credentials)).toContain(users);
  });

  it('puts the system-account user into $SYS and past the callout, only when given', async () => {
    const systemUser = await loadOrCreateSystemCredential(dir, {});
    const issuer = 'A' + 'B'.repeat(55);
    const text = renderClusterNodeConfig(plan(), 0, credentials, { calloutIssuer: issuer, systemUser });
    expect(text).toContain(
      `"$SYS": { users: [ { user: "${SYSTEM_USER}", password: "${systemUser.password}" } ] }`,
    );
    expect(text).toMatch(new RegExp(`auth_users: \\[[^\\]]*"${SYSTEM_USER}"`));
    expect(renderClusterNodeConfig(plan(), 0, credentials, { calloutIssuer: issuer })).not.toContain('$SYS');
    // The file is the coordinators' alone, and a second call reads the same password back.
    expect((await loadOrCreateSystemCredential(dir, {})).password).toBe(systemUser.password);
    expect((await stat(join(dir, SYSTEM_FILE))).mode & 0o777).toBe(0o600);
  });

  it('derives the route secret from the coordinator password only', async () => {
    const other = await loadOrCreateCredentials(join(dir, 'other'), {});
    expect(routePassword(other)).not.toBe(routePassword(credentials));
    expect(routePassword({ ...credentials, specialist: other.specialist })).toBe(routePassword(credentials));
  });

  it('refuses route URLs with credentials of their own, and a cluster node without a name', () => {
    const cluster = {
      name: 'amf',
      host: '127.0.0.1',
      port: 6222,
      routes: ['nats-route://u:p@127.0.0.1:6223'],
      routeUser: ROUTE_USER,
      routePassword: 'x',
    };
    const base = { host: '127.0.0.1', port: 4222, storeDir: '/x', credentials };
    expect(() => renderNatsConfig({ ...base, serverName: 'n1', cluster })).toThrow(/without credentials/);
    expect(() => renderNatsConfig({ ...base, cluster: { ...cluster, routes: [] } })).toThrow(/serverName/);
  });

  it('lists the client URLs the way --nats-url takes them, and connectAs splits them back', () => {
    const urls = clusterClientUrls(plan());
    expect(urls).toBe('nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224');
    expect(natsServers(` ${urls}, `)).toEqual([
      'nats://127.0.0.1:4222',
      'nats://127.0.0.1:4223',
      'nats://127.0.0.1:4224',
    ]);
  });
});

describe('nats.replicas', () => {
  it('defaults to 1 and accepts a cluster list with 3 replicas', async () => {
    const home = join(dir, 'home');
    expect((await loadConfig({ env: { HOME: home } })).nats.replicas).toBe(1);
    const config = await loadConfig({
      env: { HOME: home, AMF_NATS_URL: 'nats://127.0.0.1:4222,nats://127.0.0.1:4223' },
      flags: { nats: { replicas: 3 } },
    });
    expect(config.nats.replicas).toBe(3);
    expect(config.nats.url).toBe('nats://127.0.0.1:4222,nats://127.0.0.1:4223');
  });

  it('refuses values outside 1..5 from amf.yaml', async () => {
    const data = join(dir, 'yaml');
    await mkdir(data, { recursive: true });
    for (const bad of ['0', '6', '2.5']) {
      await writeFile(join(data, 'amf.yaml'), `nats:\n  replicas: ${bad}\n`);
      const err = await loadConfig({ configPath: join(data, 'amf.yaml'), env: { HOME: dir } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect(String((err as Error).message)).toMatch(/nats\.replicas.*between 1 and 5/);
    }
  });
});
