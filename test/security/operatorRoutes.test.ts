/**
 * No anonymous operator (issue 29): against a real mesh with no key configured, a separate OS process
 * holding no credential is refused (401) on every operator route even on loopback, while the client
 * protocol routes serve it; a wrong key is refused rather than taken as anonymous; the generated key
 * file is the owner's only (0600); from an address beyond loopback the client routes need the key
 * too; and the route table in docs/security.md is the code's.
 */
import { execFile } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import { request } from 'node:http';
import { networkInterfaces } from 'node:os';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTE_ACCESS, routeLabelOf } from '../../src/http/routeAccess.js';
import { createEvent } from '../../src/events/cloudEvent.js';
import { operatorKeyFile } from '../../src/identity/operatorKey.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const run = promisify(execFile);

interface Probe {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: unknown;
}

interface ProbeResult {
  method: string;
  path: string;
  status: number;
  body: string;
}

/**
 * Sends `probes` from a fresh `node -e` process with an environment holding no AMF setting and no
 * HOME data dir: an ordinary local process of another user, as far as credentials go.
 */
async function fromAnotherProcess(base: string, probes: Probe[]): Promise<ProbeResult[]> {
  const script = `
    const [base, probes] = JSON.parse(process.argv[1]);
    const out = [];
    for (const p of probes) {
      const init = { method: p.method, headers: { ...(p.headers ?? {}) } };
      if (p.body !== undefined) {
        init.body = typeof p.body === 'string' ? p.body : JSON.stringify(p.body);
        init.headers['content-type'] ??= 'application/json';
      }
      const res = await fetch(base + p.path, init);
      const body = res.headers.get('content-type')?.startsWith('text/event-stream') ? '' : await res.text();
      out.push({ method: p.method, path: p.path, status: res.status, body: body.slice(0, 2000) });
      await res.body?.cancel().catch(() => {});
    }
    process.stdout.write(JSON.stringify(out));`;
  const { stdout } = await run(process.execPath, ['-e', script, JSON.stringify([base, probes])], {
    env: { PATH: process.env.PATH ?? '' },
    timeout: 60_000,
  });
  return JSON.parse(stdout) as ProbeResult[];
}

const OPERATOR_PROBES: Probe[] = [
  { method: 'GET', path: '/events' },
  { method: 'GET', path: '/events?subject=amf.task.%3E' },
  { method: 'GET', path: '/events/history' },
  { method: 'GET', path: '/tasks' },
  { method: 'GET', path: '/tasks/00000000-0000-4000-8000-000000000000' },
  { method: 'GET', path: '/agents' },
  { method: 'GET', path: `/agents/${encodeURIComponent('spiffe://local/worker/echo-op')}` },
  { method: 'DELETE', path: `/agents/${encodeURIComponent('spiffe://local/worker/echo-op')}` },
  { method: 'GET', path: '/admissions' },
  { method: 'GET', path: '/tools' },
  { method: 'GET', path: '/audit' },
  { method: 'GET', path: '/metrics' },
  { method: 'GET', path: '/no-such-route' },
  { method: 'GET', path: '/publish' },
];

/** A valid evidence event, as any client may publish it (the body's sender is replaced anyway). */
const evidence = () =>
  createEvent({
    type: 'amf.evidence.publish',
    sender: {
      identity: 'urn:test:anyone',
      source: 'urn:test:anyone',
      role: 'connector',
      trustDomain: 'local',
    },
    payload: { note: 'from another process' },
  });

describe('operator routes against a real mesh, from another OS process', () => {
  let mesh: TestMesh;

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('echo-op', ['echo'], echoHandler);
  });
  afterAll(() => mesh?.close());

  it('generated the operator key into the data dir, readable by its owner only', async () => {
    const file = operatorKeyFile(mesh.config.dataDir);
    expect((await readFile(file, 'utf8')).trim()).toBe(mesh.operatorKey);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(mesh.config.dataDir)).mode & 0o077).toBe(0);
    // 32 random bytes, base64url.
    expect(mesh.operatorKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('refuses every operator route without a key, even on loopback, saying where the key is', async () => {
    const results = await fromAnotherProcess(mesh.url, OPERATOR_PROBES);
    for (const r of results) {
      expect(r.status, `${r.method} ${r.path}`).toBe(401);
      const body = JSON.parse(r.body) as { error: { code: string; reason: string; message: string } };
      expect(body.error, `${r.method} ${r.path}`).toMatchObject({
        code: 'UNAUTHORIZED',
        reason: 'missing_key',
      });
      expect(body.error.message).toContain('operator.key');
      expect(body.error.message).toContain('Authorization: Bearer');
    }
    // Nothing was forgotten by the refused DELETE.
    expect(mesh.coordinator.registry.isLive('spiffe://local/worker/echo-op')).toBe(true);
  });

  it('serves the client protocol routes and the public ones on loopback without a key', async () => {
    const results = await fromAnotherProcess(mesh.url, [
      { method: 'GET', path: '/health' },
      { method: 'GET', path: '/' },
      { method: 'GET', path: '/.well-known/agent-card.json' },
      { method: 'GET', path: '/v1/models' },
      {
        method: 'POST',
        path: '/v1/chat/completions',
        // An OpenAI SDK's placeholder key is not taken for a wrong operator key on loopback.
        headers: { authorization: 'Bearer unused' },
        body: { model: 'amf/echo', messages: [{ role: 'user', content: 'hello from afar' }] },
      },
      {
        method: 'POST',
        path: '/a2a',
        headers: { 'a2a-version': '1.0' },
        body: { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'no-such-task' } },
      },
      { method: 'GET', path: '/api/amp/discover' },
      { method: 'POST', path: '/mcp/call', body: { name: 'fabric.health', arguments: {} } },
      {
        method: 'POST',
        path: '/mcp',
        headers: { accept: 'application/json, text/event-stream' },
        body: {
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: {
            protocolVersion: '2025-06-18',
            capabilities: {},
            clientInfo: { name: 'p', version: '1' },
          },
        },
      },
      {
        method: 'POST',
        path: '/publish',
        headers: { 'content-type': 'application/cloudevents+json' },
        body: evidence(),
      },
    ]);
    const status = Object.fromEntries(results.map((r) => [`${r.method} ${r.path}`, r.status]));
    expect(status).toEqual({
      'GET /health': 200,
      'GET /': 200,
      'GET /.well-known/agent-card.json': 200,
      'GET /v1/models': 200,
      'POST /v1/chat/completions': 200,
      'POST /a2a': 200,
      'GET /api/amp/discover': 200,
      'POST /mcp/call': 200,
      'POST /mcp': 200,
      'POST /publish': 202,
    });
    const chat = JSON.parse(results[4]!.body) as { choices: Array<{ message: { content: string } }> };
    expect(chat.choices[0]!.message.content).toBe('hello from afar');
    // Anonymous on /publish: its own name, and only evidence and artifacts.
    expect(JSON.parse(results[9]!.body)).toMatchObject({ published_as: { identity: 'amf:http-client' } });
  });

  it('refuses a wrong key on operator and client routes alike, never as anonymous', async () => {
    const wrong = { authorization: 'Bearer not-the-key' };
    const results = await fromAnotherProcess(mesh.url, [
      { method: 'GET', path: '/agents', headers: wrong },
      { method: 'GET', path: '/events?api_key=not-the-key' },
      { method: 'GET', path: '/agents?api_key=' + encodeURIComponent(mesh.operatorKey) },
      { method: 'POST', path: '/mcp/call', headers: wrong, body: { name: 'fabric.health', arguments: {} } },
      { method: 'GET', path: '/api/amp/discover', headers: wrong },
      {
        method: 'POST',
        path: '/publish',
        headers: { ...wrong, 'content-type': 'application/cloudevents+json' },
        body: evidence(),
      },
      { method: 'GET', path: '/agents', headers: { authorization: `Basic ${btoa('x:y')}` } },
    ]);
    for (const r of results) expect(r.status, `${r.method} ${r.path}`).toBe(401);
    // AMF's own shape names the reason (Fabric and AMP refuse in theirs, checked in guards.test.ts).
    const reasons = results
      .filter((r) => !r.path.startsWith('/mcp/call') && !r.path.startsWith('/api/amp/'))
      .map((r) => (JSON.parse(r.body) as { error?: { reason?: string } }).error?.reason);
    // A query key outside /events is refused as unusable, even the right one: keys do not go in URLs.
    expect(reasons).toEqual(['wrong_key', 'wrong_key', 'unusable_key', 'wrong_key', 'unusable_key']);
  });

  it('lets the operator key through on every operator route', async () => {
    const key = { authorization: `Bearer ${mesh.operatorKey}` };
    const results = await fromAnotherProcess(
      mesh.url,
      OPERATOR_PROBES.filter((p) => p.method === 'GET' && !p.path.startsWith('/events?')).map((p) => ({
        ...p,
        headers: key,
      })),
    );
    for (const r of results) expect(r.status, `${r.method} ${r.path}`).not.toBe(401);
    const byPath = Object.fromEntries(results.map((r) => [r.path, r.status]));
    expect(byPath['/agents']).toBe(200);
    expect(byPath['/metrics']).toBe(200);
    expect(byPath['/no-such-route']).toBe(404);
  });
});

/** The docs table under "## HTTP edge" whose header is `| route | rule | why |`, as [route, rule]. */
function docsRouteTable(markdown: string): Array<[string, string]> {
  const lines = markdown.split('\n');
  const header = lines.findIndex((l) => /^\|\s*route\s*\|\s*rule\s*\|/.test(l));
  if (header < 0) throw new Error('docs/security.md has no `| route | rule |` table');
  const rows: Array<[string, string]> = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const [route = '', rule = ''] = line
      .split('|')
      .slice(1)
      .map((c) => c.trim());
    rows.push([route.replace(/`/g, ''), rule]);
  }
  return rows;
}

describe('the route table', () => {
  it('in docs/security.md is the code’s, row for row', async () => {
    const docs = await readFile(new URL('../../docs/security.md', import.meta.url), 'utf8');
    expect(docsRouteTable(docs)).toEqual(ROUTE_ACCESS.map((row) => [routeLabelOf(row), row.rule]));
  });
});

/** True inside a private network namespace: nothing but loopback, so adding an address touches no host. */
function privateNamespace(): boolean {
  return Object.keys(networkInterfaces()).every((name) => name === 'lo');
}

/** Adds 10.99.0.1/32 to lo (root inside `unshare -n`); false when this environment cannot. */
async function addSecondAddress(): Promise<boolean> {
  if (!privateNamespace()) return false;
  const has = () => (networkInterfaces().lo ?? []).some((a) => a.address === SECOND_ADDRESS);
  if (has()) return true;
  try {
    await run('ip', ['addr', 'add', `${SECOND_ADDRESS}/32`, 'dev', 'lo']);
  } catch (err) {
    // Already there (another test file of this run) is fine; no permission is not.
    if (!has()) return Boolean(String((err as Error).message).includes('File exists'));
  }
  return has();
}

const SECOND_ADDRESS = '10.99.0.1';

function getFrom(
  url: string,
  localAddress: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { localAddress, agent: false, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('client routes from beyond loopback', () => {
  let mesh: TestMesh | undefined;
  let base = '';
  let possible = false;

  beforeAll(async () => {
    possible = await addSecondAddress();
    if (!possible) return;
    mesh = await startTestMesh({ config: { coordinator: { host: '0.0.0.0' } } });
    base = `http://${SECOND_ADDRESS}:${new URL(mesh.url).port}`;
  });
  afterAll(() => mesh?.close());

  it('need the operator key from a non-loopback address (skipped where no second address can be added)', async (ctx) => {
    if (!possible) {
      ctx.skip(`cannot add ${SECOND_ADDRESS} to lo here: run inside \`unshare -n\` as root`);
      return;
    }
    for (const path of ['/v1/models', '/api/amp/discover']) {
      const none = await getFrom(`${base}${path}`, SECOND_ADDRESS);
      expect(none.status, path).toBe(401);
      expect(none.body).toContain(`from beyond loopback (${SECOND_ADDRESS})`);
      // Beyond loopback /v1 takes no placeholder: a wrong bearer is refused.
      expect(
        (await getFrom(`${base}${path}`, SECOND_ADDRESS, { authorization: 'Bearer unused' })).status,
      ).toBe(401);
      const keyed = await getFrom(`${base}${path}`, SECOND_ADDRESS, {
        authorization: `Bearer ${mesh!.operatorKey}`,
      });
      expect(keyed.status, path).toBe(200);
    }
    // Public routes stay public from anywhere; operator routes stay closed.
    expect((await getFrom(`${base}/health`, SECOND_ADDRESS)).status).toBe(200);
    expect((await getFrom(`${base}/agents`, SECOND_ADDRESS)).status).toBe(401);
    // The same routes from loopback on the same server need nothing.
    const port = new URL(mesh!.url).port;
    expect((await getFrom(`http://127.0.0.1:${port}/v1/models`, '127.0.0.1')).status).toBe(200);
  });
});
