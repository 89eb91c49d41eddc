// `amf doctor`: real ports, real files, real programs; everything in temp dirs on 127.0.0.1.
import { execFileSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatDoctorReport, runDoctor, type DoctorCheck } from '../../src/cli/doctor.js';
import { checkMemoryTrimming } from '../../src/cli/doctorChecks.js';
import { loadConfig, type AmfConfig, type ConfigOverrides } from '../../src/config/config.js';
import { clusterNatsBinary } from '../helpers/natsCluster.js';
import {
  compareVersions,
  parseServerVersion,
  STEADY_FILESTORE_SINCE,
} from '../../src/fabric/natsServer/version.js';

let home: string;
let dataDir: string;
const servers: Array<Server | HttpServer> = [];

beforeEach(async () => {
  home = await mkdtemp(path.join(tmpdir(), 'amf-doctor-'));
  dataDir = path.join(home, 'data');
  await mkdir(dataDir);
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  await rm(home, { recursive: true, force: true });
});

/** A config on a temp data dir with ports 0 (always free), plus the given overrides. */
function configWith(flags: ConfigOverrides = {}): Promise<AmfConfig> {
  return loadConfig({
    env: { HOME: home },
    flags: {
      ...flags,
      dataDir: flags.dataDir ?? dataDir,
      coordinator: { port: 0, ...flags.coordinator },
      nats: { port: 0, ...flags.nats },
    },
  });
}

function check(checks: DoctorCheck[], name: string): DoctorCheck {
  const found = checks.find((c) => c.name === name);
  if (!found) throw new Error(`no check named ${name} in ${checks.map((c) => c.name).join(', ')}`);
  return found;
}

async function listen<T extends Server | HttpServer>(server: T): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

/** A port that was free a moment ago and has nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function hasNatsServer(): boolean {
  try {
    execFileSync('nats-server', ['--version'], { timeout: 2000, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('runDoctor', () => {
  it('passes on a healthy setup (node, data dir, free ports, no credentials yet)', async () => {
    const result = await runDoctor({ config: await configWith() });
    expect(check(result.checks, 'node').level).toBe('ok');
    expect(check(result.checks, 'ed25519')).toMatchObject({
      level: 'ok',
      detail: expect.stringMatching(/libsodium/),
    });
    // This machine is Linux with glibc, and koffi's prebuilt binary loads.
    expect(check(result.checks, 'memory')).toMatchObject({
      level: 'ok',
      detail: expect.stringMatching(/malloc_trim runs after full garbage collections/),
    });
    expect(check(result.checks, 'data-dir')).toMatchObject({ level: 'ok', ok: true });
    expect(check(result.checks, 'coordinator-port').level).toBe('ok');
    expect(check(result.checks, 'nats-port').level).toBe('ok');
    expect(check(result.checks, 'credentials').level).toBe('ok');
    // opa is optional: at worst a warning, with the install command as the fix.
    const opa = check(result.checks, 'opa');
    expect(opa.level).not.toBe('fail');
    if (opa.level === 'warn') expect(opa.fix).toBe('go install github.com/open-policy-agent/opa@latest');
    for (const c of result.checks) expect(c.ok).toBe(c.level === 'ok');
  });

  it.skipIf(!hasNatsServer())('finds nats-server and reports its version', async () => {
    const result = await runDoctor({ config: await configWith() });
    const nats = check(result.checks, 'nats-server');
    expect(nats.detail).toMatch(/^nats-server \d+\.\d+\.\d+/);
    // Debian's 2.9 runs the mesh but slows a long run down: a warning with the fix, not a failure.
    const version = parseServerVersion(nats.detail)!;
    if (compareVersions(version, STEADY_FILESTORE_SINCE) < 0) {
      expect(nats).toMatchObject({ level: 'warn', fix: expect.stringContaining('scripts/install-nats.sh') });
      expect(nats.detail).toMatch(/slows down as a mesh runs/);
    } else expect(nats.level).toBe('ok');
    expect(result.ok).toBe(true);
  });

  it('passes the pinned nats-server (2.10 or newer) without a warning', async () => {
    const binary = await clusterNatsBinary();
    const result = await runDoctor({ config: await configWith({ nats: { serverBinary: binary } }) });
    expect(check(result.checks, 'nats-server')).toMatchObject({
      level: 'ok',
      detail: expect.stringMatching(/^\S+ 2\.(1\d|[2-9]\d)\.\d+$/),
    });
  });

  it('fails when the nats-server binary is missing, with an install hint', async () => {
    const result = await runDoctor({
      config: await configWith({ nats: { serverBinary: 'no-such-nats-server-xyz' } }),
    });
    const nats = check(result.checks, 'nats-server');
    expect(nats).toMatchObject({ level: 'fail', ok: false });
    expect(nats.detail).toContain('not found');
    expect(nats.fix).toContain('nats-server');
    expect(result.ok).toBe(false);
  });

  it('checks that an external NATS url accepts TCP instead of looking for the binary', async () => {
    const port = await listen(createServer((socket) => socket.end()));
    const result = await runDoctor({
      config: await configWith({
        nats: { url: `nats://127.0.0.1:${port}`, serverBinary: 'no-such-nats-server-xyz' },
      }),
    });
    expect(check(result.checks, 'nats')).toMatchObject({
      level: 'ok',
      detail: `127.0.0.1:${port} accepts connections`,
    });
    expect(result.checks.some((c) => c.name === 'nats-server' || c.name === 'nats-port')).toBe(false);

    const dead = await closedPort();
    const failed = await runDoctor({ config: await configWith({ nats: { url: `127.0.0.1:${dead}` } }) });
    const nats = check(failed.checks, 'nats');
    expect(nats.level).toBe('fail');
    expect(nats.detail).toContain(`127.0.0.1:${dead} (ECONNREFUSED)`);
  });

  it('fails when the NATS port it would spawn on is taken', async () => {
    const port = await listen(createServer());
    const result = await runDoctor({ config: await configWith({ nats: { port } }) });
    const nats = check(result.checks, 'nats-port');
    expect(nats.level).toBe('fail');
    expect(nats.fix).toContain('--nats-port');
  });

  it('fails when the coordinator port is used by something else', async () => {
    const port = await listen(createHttpServer((_req, res) => res.writeHead(404).end('not here')));
    const result = await runDoctor({ config: await configWith({ coordinator: { port } }) });
    const c = check(result.checks, 'coordinator-port');
    expect(c.level).toBe('fail');
    expect(c.detail).toContain(`127.0.0.1:${port} is in use`);
    expect(c.fix).toContain('--port');
    expect(result.ok).toBe(false);
  });

  it('accepts a coordinator already answering /health on its port', async () => {
    const port = await listen(
      createHttpServer((req, res) => {
        if (req.url === '/health')
          res.setHeader('content-type', 'application/json').end('{"status":"ok","version":"0.1.0"}');
        else res.writeHead(404).end();
      }),
    );
    const result = await runDoctor({
      config: await configWith({ coordinator: { port } }),
      coordinatorUrl: `http://127.0.0.1:${port}`,
    });
    expect(check(result.checks, 'coordinator-port')).toMatchObject({ level: 'ok' });
    expect(check(result.checks, 'coordinator-port').detail).toContain('already running');
    expect(check(result.checks, 'coordinator').detail).toContain('version 0.1.0');
  });

  it("accepts the NATS port of a running mesh found through its coordinator's /health (another data dir)", async () => {
    const natsPort = await listen(createServer());
    const port = await listen(
      createHttpServer((req, res) => {
        if (req.url !== '/health') return void res.writeHead(404).end();
        const body = { status: 'ok', amf_version: '9.9.9', nats: { url: `nats://127.0.0.1:${natsPort}` } };
        res.setHeader('content-type', 'application/json').end(JSON.stringify(body));
      }),
    );
    const result = await runDoctor({
      config: await configWith({ coordinator: { port }, nats: { port: natsPort } }),
    });
    expect(check(result.checks, 'nats-port')).toMatchObject({
      level: 'ok',
      detail: `port ${natsPort} is used by the running mesh's nats-server (coordinator at http://127.0.0.1:${port})`,
    });
    expect(check(result.checks, 'coordinator-port').detail).toContain('(amf 9.9.9)');
    // Another program on the port (its /health does not name that NATS port) is still a failure.
    const other = await listen(createServer());
    const failed = await runDoctor({
      config: await configWith({ coordinator: { port }, nats: { port: other } }),
    });
    expect(check(failed.checks, 'nats-port').level).toBe('fail');
  });

  it('warns when the given coordinator url does not answer', async () => {
    const dead = await closedPort();
    const result = await runDoctor({
      config: await configWith(),
      coordinatorUrl: `http://127.0.0.1:${dead}`,
    });
    const c = check(result.checks, 'coordinator');
    expect(c.level).toBe('warn');
    expect(c.fix).toBe('start one with amf up');
  });

  it('fails when credentials.json is readable by others, and passes at 0600', async () => {
    const file = path.join(dataDir, 'credentials.json');
    await writeFile(file, '{}');
    await chmod(file, 0o644);
    const bad = await runDoctor({ config: await configWith() });
    const creds = check(bad.checks, 'credentials');
    expect(creds).toMatchObject({ level: 'fail', ok: false, fix: `chmod 600 ${file}` });
    expect(creds.detail).toContain('0644');
    expect(bad.ok).toBe(false);

    await chmod(file, 0o600);
    const good = await runDoctor({ config: await configWith() });
    expect(check(good.checks, 'credentials').level).toBe('ok');
  });

  it('checks the operator key and the coordinator key as it checks credentials.json', async () => {
    for (const name of ['operator.key', 'coordinator.nk']) {
      const file = path.join(dataDir, name);
      await writeFile(file, 'secret\n');
      await chmod(file, 0o640);
      const bad = check((await runDoctor({ config: await configWith() })).checks, 'credentials');
      expect(bad).toMatchObject({ level: 'fail', fix: `chmod 600 ${file}` });
      await chmod(file, 0o600);
      expect(check((await runDoctor({ config: await configWith() })).checks, 'credentials').level).toBe('ok');
    }
  });

  it('accepts a data dir that does not exist yet but can be created, and rejects a file', async () => {
    const later = await runDoctor({ config: await configWith({ dataDir: path.join(home, 'new', 'dir') }) });
    expect(check(later.checks, 'data-dir')).toMatchObject({ level: 'ok' });
    expect(check(later.checks, 'data-dir').detail).toContain('can be created');

    const notDir = path.join(home, 'plain-file');
    await writeFile(notDir, 'x');
    const bad = await runDoctor({ config: await configWith({ dataDir: notDir }) });
    expect(check(bad.checks, 'data-dir')).toMatchObject({ level: 'fail' });
  });
});

describe('checkMemoryTrimming', () => {
  it('says when AMF_MALLOC_TRIM=0 turned the trimming off', () => {
    expect(checkMemoryTrimming({ AMF_MALLOC_TRIM: '0' })).toMatchObject({
      level: 'ok',
      detail: 'no malloc trimming: turned off by AMF_MALLOC_TRIM=0',
    });
  });
});

describe('formatDoctorReport', () => {
  it('prints one line per check with its mark and fix', () => {
    const text = formatDoctorReport({
      ok: false,
      checks: [
        { name: 'node', ok: true, level: 'ok', detail: 'Node.js 20.0.0' },
        { name: 'opa', ok: false, level: 'warn', detail: 'opa not found', fix: 'go install x' },
        { name: 'credentials', ok: false, level: 'fail', detail: 'mode 0644', fix: 'chmod 600 /x' },
      ],
    });
    expect(text.split('\n')).toEqual([
      '✓ node: Node.js 20.0.0',
      '! opa: opa not found (fix: go install x)',
      '✗ credentials: mode 0644 (fix: chmod 600 /x)',
    ]);
  });
});
