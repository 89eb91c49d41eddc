/**
 * The `https://` tier of MCP call authentication: an HTTPS worker (self-signed certificate made with
 * the openssl CLI) is TOFU-pinned at admission (SHA-256 of its certificate in the KV bucket
 * amf_mcp_pins), its tool is called through the coordinator's /mcp with the official SDK client;
 * restarted on the same port with another certificate, the call is refused with an MCP error, warned
 * (`mcp_tls_pin_mismatch`) and audited. Also: X-AMF-Coordinator-Fingerprint and the SPIFFE hook on
 * every forwarded request, and the coordinator key's file mode.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { kvKey } from '../../src/fabric/jetstream.js';
import { createEphemeralAgentKey, type AgentKey } from '../../src/identity/agentKey.js';
import type { McpAuditRecord } from '../../src/protocols/mcp/federation/audit.js';
import { MCP_TLS_PIN_MISMATCH_CODE } from '../../src/protocols/mcp/federation/federation.js';
import { createAgentFetch, NO_CALL_CREDENTIALS } from '../../src/protocols/mcp/federation/callAuth.js';
import {
  COORDINATOR_KEY_FILE,
  CoordinatorFingerprintRecord,
  loadCoordinatorFingerprint,
} from '../../src/protocols/mcp/coordinatorFingerprint.js';
import { probeCertificate } from '../../src/protocols/mcp/federation/tlsPins.js';

const run = promisify(execFile);
let mesh: TestMesh;
let certDir: string;

interface CertPair {
  cert: Buffer;
  key: Buffer;
  /** As `openssl x509 -fingerprint -sha256` prints it. */
  fingerprint: string;
}

/** A self-signed P-256 certificate for 127.0.0.1, made by the openssl CLI. */
async function selfSigned(name: string): Promise<CertPair> {
  const cert = join(certDir, `${name}.crt`);
  const key = join(certDir, `${name}.key`);
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-addext',
    'subjectAltName=IP:127.0.0.1',
  ]);
  const { stdout } = await run('openssl', ['x509', '-noout', '-fingerprint', '-sha256', '-in', cert]);
  const fingerprint = stdout.trim().split('=')[1]!;
  return { cert: await readFile(cert), key: await readFile(key), fingerprint };
}

beforeAll(async () => {
  certDir = await mkdtemp(join(tmpdir(), 'amf-tls-test-'));
  mesh = await startTestMesh();
}, 30_000);
afterAll(async () => {
  await mesh?.close();
  await rm(certDir, { recursive: true, force: true });
});

// An agent keeps its key across restarts (an id stays bound to its first key): between the two starts
// of one agent only the certificate changes.
const agentKeys = new Map<string, AgentKey>();

async function httpsWorker(name: string, pair: CertPair, port = 0): Promise<RunningWorker> {
  let key = agentKeys.get(name);
  if (!key) agentKeys.set(name, (key = createEphemeralAgentKey()));
  const w = await startWorker({
    name,
    tags: ['echo'],
    handler: echoHandler,
    natsUrl: mesh.coordinator.natsUrl,
    credential: mesh.coordinator.credentials.specialist,
    key,
    port,
    heartbeatSeconds: 1,
    tls: { cert: pair.cert, key: pair.key },
  });
  await mesh.waitFor(() => mesh.coordinator.registry.isLive(w.worker.agentId), 10_000, `${name} admitted`);
  return w;
}

async function audit(limit = 50): Promise<McpAuditRecord[]> {
  const res = await mesh.fetch(`/audit?limit=${limit}`);
  return ((await res.json()) as { records: McpAuditRecord[] }).records;
}

const warningsFor = (agentId: string, reason: string) =>
  mesh.events.filter(
    (e) =>
      e.event.type === 'amf.policy.warning' &&
      (e.event.data.payload as { reason?: string }).reason === reason &&
      (e.event.data.payload as { agent_id?: string }).agent_id === agentId,
  );

describe('TOFU pinning of https:// agents', () => {
  it('pins at admission, forwards while it matches, refuses, warns and audits once it does not', async () => {
    const first = await selfSigned('tofu-first');
    const second = await selfSigned('tofu-second');
    expect(first.fingerprint).not.toBe(second.fingerprint);
    let w = await httpsWorker('tofu-w', first);
    const agentId = w.worker.agentId;
    expect(w.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(w.worker.agentRecord().mcp_endpoint).toBe(`${w.url}/mcp`);
    // The worker really serves TLS with the certificate openssl made.
    expect(await probeCertificate(new URL(w.url))).toBe(first.fingerprint);

    const client = new Client({ name: 'amf-tls-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${mesh.url}/mcp`)));
    try {
      await mesh.waitFor(
        async () => (await client.listTools()).tools.some((t) => t.name === 'tofu-w__echo'),
        10_000,
        'https tool listed',
      );
      const ok = (await client.callTool({
        name: 'tofu-w__echo',
        arguments: { text: 'over pinned tls' },
      })) as CallToolResult;
      expect(ok.isError).toBeFalsy();
      expect(ok.content[0]).toMatchObject({ type: 'text', text: expect.stringContaining('over pinned tls') });

      // The pin is the openssl fingerprint of the first certificate, in the shared KV bucket.
      const entry = await mesh.coordinator.stores.mcpPins.get(kvKey(agentId));
      expect(entry?.json()).toMatchObject({
        agent_id: agentId,
        fingerprint256: first.fingerprint,
        endpoint: `${w.url}/mcp`,
      });
      const okRecord = (await audit(20)).find((r) => r.wire_name === 'tofu-w__echo' && r.outcome === 'ok');
      expect(okRecord).toMatchObject({ auth: 'tofu', decision: 'allow' });
      // The worker recorded the coordinator's fingerprint from the forwarded calls.
      expect(w.coordinatorFingerprint.first?.fingerprint).toBe(
        await loadCoordinatorFingerprint(mesh.config.dataDir),
      );
      // The TLS tier is authenticated: no plaintext warning for this agent.
      expect(warningsFor(agentId, 'mcp_call_unauthenticated')).toHaveLength(0);

      // Same agent, same port, another certificate.
      const port = Number(new URL(w.url).port);
      await w.close(1000);
      await mesh.waitFor(() => !mesh.coordinator.registry.isLive(agentId), 10_000, 'first worker gone');
      w = await httpsWorker('tofu-w', second, port);
      expect(await probeCertificate(new URL(w.url))).toBe(second.fingerprint);
      await mesh.waitFor(
        async () => (await client.listTools()).tools.some((t) => t.name === 'tofu-w__echo'),
        10_000,
        'tool listed again (last verified listing)',
      );
      const refused = (await client
        .callTool({ name: 'tofu-w__echo', arguments: { text: 'to an impostor' } })
        .catch((e: unknown) => e)) as McpError;
      expect(refused).toBeInstanceOf(McpError);
      expect(refused.code).toBe(MCP_TLS_PIN_MISMATCH_CODE);
      expect(refused.message).toMatch(/TOFU pin mismatch/);
      expect(refused.data).toMatchObject({
        reason: 'mcp_tls_pin_mismatch',
        pinned_sha256: first.fingerprint,
        presented_sha256: second.fingerprint,
      });

      const warning = await mesh.waitForEvent(
        (e) => warningsFor(agentId, 'mcp_tls_pin_mismatch').includes(e),
        5000,
        'mcp_tls_pin_mismatch warning',
      );
      expect(warning.event.data.payload).toMatchObject({
        details: { pinned_sha256: first.fingerprint, presented_sha256: second.fingerprint },
      });
      const denied = (await audit(20)).find(
        (r) => r.wire_name === 'tofu-w__echo' && r.reasons.includes('mcp_tls_pin_mismatch'),
      );
      expect(denied).toMatchObject({
        agent_id: agentId,
        decision: 'deny',
        outcome: 'denied',
        auth: 'tofu',
      });
      // The pin did not move to the new certificate.
      expect((await mesh.coordinator.stores.mcpPins.get(kvKey(agentId)))?.json()).toMatchObject({
        fingerprint256: first.fingerprint,
      });
    } finally {
      await client.close();
      await w.close(1000);
    }
  }, 60_000);
});

describe('amf worker --tls-cert/--tls-key', () => {
  it('serves HTTPS with the given certificate and is admitted with an https:// MCP endpoint', async () => {
    const pair = await selfSigned('tofu-cli');
    const child = spawn(
      process.execPath,
      [
        fileURLToPath(new URL('../../bin/amf.js', import.meta.url)),
        'worker',
        '--name',
        'tofu-cli',
        '--tags',
        'echo',
        '--tls-cert',
        join(certDir, 'tofu-cli.crt'),
        '--tls-key',
        join(certDir, 'tofu-cli.key'),
        '--nats-url',
        mesh.coordinator.natsUrl,
        '--data-dir',
        mesh.config.dataDir,
        '--port',
        '0',
        '--no-mdns',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, AMF_LOG_LEVEL: 'silent' } },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const agentId = 'spiffe://local/worker/tofu-cli';
    try {
      // A cold CLI start can take long on a busy CI machine.
      await mesh.waitFor(() => mesh.coordinator.registry.isLive(agentId), 60_000, `admitted (${stderr})`);
      const endpoint = mesh.coordinator.registry.get(agentId)!.record.mcp_endpoint!;
      expect(endpoint).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/mcp$/);
      expect(await probeCertificate(new URL(endpoint))).toBe(pair.fingerprint);
      await mesh.waitFor(
        async () =>
          (await mesh.coordinator.stores.mcpPins.get(kvKey(agentId)))?.json<{ fingerprint256: string }>()
            .fingerprint256 === pair.fingerprint,
        10_000,
        'CLI worker pinned',
      );
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  }, 120_000);

  it('refuses a certificate without its key, naming the flags', async () => {
    await selfSigned('tofu-half');
    const run = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        [
          fileURLToPath(new URL('../../bin/amf.js', import.meta.url)),
          'worker',
          '--name',
          'tofu-half',
          '--tags',
          'echo',
          '--tls-cert',
          join(certDir, 'tofu-half.crt'),
          '--nats-url',
          mesh.coordinator.natsUrl,
          '--no-mdns',
        ],
        { timeout: 60_000 },
        (err, _stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stderr }),
      ),
    );
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/--tls-cert and --tls-key go together/);
  }, 90_000);
});

describe('what the coordinator sends on forwarded requests', () => {
  it('X-AMF-Coordinator-Fingerprint from a 0600 key in the data dir, and the SPIFFE hook per request', async () => {
    const keyFile = join(mesh.config.dataDir, COORDINATOR_KEY_FILE);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    const fingerprint = await loadCoordinatorFingerprint(mesh.config.dataDir);
    expect(fingerprint).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    // Stable: loading again reads the same key.
    expect(await loadCoordinatorFingerprint(mesh.config.dataDir)).toBe(fingerprint);

    const seen: IncomingHttpHeaders[] = [];
    const server = createServer((req, res) => {
      seen.push(req.headers);
      res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
    try {
      const plain = createAgentFetch({
        agentId: 'spiffe://local/worker/x',
        endpoint: url,
        credentials: NO_CALL_CREDENTIALS,
        coordinatorFingerprint: fingerprint,
      });
      expect(await (await plain.fetch(url, { method: 'POST', body: '{}' })).text()).toBe('ok');
      expect(seen[0]!['x-amf-coordinator-fingerprint']).toBe(fingerprint);
      expect(seen[0]!.authorization).toBeUndefined();

      // A provider filling the SPIFFE hook is asked on every request (SVIDs expire).
      let asked = 0;
      const bearer = createAgentFetch({
        agentId: 'spiffe://local/worker/x',
        endpoint: url,
        credentials: {
          kind: 'spiffe',
          headersFor: (_agent, audience) => {
            asked++;
            return Promise.resolve({ authorization: `Bearer svid-${asked}-for-${audience}` });
          },
        },
        coordinatorFingerprint: fingerprint,
      });
      await (await bearer.fetch(url, { method: 'POST', body: '{}' })).text();
      await (await bearer.fetch(url, { method: 'POST', body: '{}' })).text();
      expect(seen.slice(1).map((h) => h.authorization)).toEqual([
        `Bearer svid-1-for-${url}`,
        `Bearer svid-2-for-${url}`,
      ]);
    } finally {
      server.close();
    }
  });
});

describe('agents record the coordinator fingerprint on first contact', () => {
  it('keeps the first well-formed value and reports each different one once', () => {
    const a = Array.from({ length: 32 }, () => 'AB').join(':');
    const b = Array.from({ length: 32 }, () => 'CD').join(':');
    const changes: Array<[string, string]> = [];
    const record = new CoordinatorFingerprintRecord((first, seen) => changes.push([first, seen]));
    record.observe(undefined);
    record.observe('not a fingerprint');
    expect(record.first).toBeUndefined();
    record.observe(a);
    record.observe(a);
    record.observe(b);
    record.observe(b);
    expect(record.first?.fingerprint).toBe(a);
    expect(changes).toEqual([[a, b]]);
  });
});
