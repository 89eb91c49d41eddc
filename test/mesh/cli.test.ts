// The built `amf` CLI (bin/amf.js -> dist/) as child processes against a running test mesh.
// dist/ must be current: scripts/test.sh builds before the tests; by hand, run `npx tsc -p tsconfig.json`.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { cleanCliEnv, spawnAmf } from '../helpers/amfCli.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const AMF_BIN = join(ROOT, 'bin/amf.js');
const PACKAGE_VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string })
  .version;

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

describe('amf CLI against a running mesh', () => {
  let mesh: TestMesh;
  let echo: RunningWorker;
  let home: string;

  /** The environment of a spawned `amf`: no AMF_* variables, the temp HOME. */
  function cliEnv(): NodeJS.ProcessEnv {
    return cleanCliEnv(home);
  }

  /** Runs `amf ...args` with a clean AMF_* environment and a temp HOME; never rejects. */
  function amf(args: string[]): Promise<CliRun> {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('AMF_')) env[k] = v;
    env.HOME = home;
    return new Promise((resolve) => {
      execFile(process.execPath, [AMF_BIN, ...args], { env, timeout: 20_000 }, (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      });
    });
  }

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/cli/main.js')))
      throw new Error('dist/ is missing: run `npx tsc -p tsconfig.json` (scripts/test.sh builds first)');
    home = await mkdtemp(join(tmpdir(), 'amf-cli-home-'));
    mesh = await startTestMesh();
    echo = await mesh.startWorker('echo-cli', ['echo'], echoHandler);
  });
  afterAll(async () => {
    await mesh?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('amf --version prints the package version', async () => {
    const run = await amf(['--version']);
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe(PACKAGE_VERSION);
  });

  it('amf agents lists the worker with its status and tags (the operator key read from the data dir)', async () => {
    const run = await amf(['agents', '--coordinator', mesh.url, '--data-dir', mesh.config.dataDir]);
    expect(run.code, run.stderr).toBe(0);
    // A header row first, kubectl-style, its columns aligned with the rows'.
    const [header, ...rows] = run.stdout.split('\n');
    expect(header).toMatch(/^STATUS\s+AGENT\s+TAGS\s+ENDPOINT$/);
    const row = rows.find((l) => l.includes(echo.worker.agentId))!;
    expect(row.indexOf(echo.worker.agentId)).toBe(header!.indexOf('AGENT'));
    const line = run.stdout.split('\n').find((l) => l.includes(echo.worker.agentId));
    expect(line, run.stdout).toBeDefined();
    expect(line).toMatch(/^live\s/);
    expect(line).toContain('echo');
    expect(line).toContain(echo.url);
  });

  it('amf agents without the operator key is refused and says where the key is', async () => {
    // HOME is a fresh temp dir: its default data dir holds no operator.key.
    const run = await amf(['agents', '--coordinator', mesh.url]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('HTTP 401');
    expect(run.stderr).toContain('operator.key');
    expect(run.stderr).toContain('AMF_API_KEY');
  });

  it('amf up --help prefers AMF_API_KEY to --api-key', async () => {
    const help = await amf(['up', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--api-key <key>[\s\S]*prefer\s+AMF_API_KEY/);
  });

  it('amf -V prints the version too, and amf --help lists every command', async () => {
    expect((await amf(['-V'])).stdout.trim()).toBe(PACKAGE_VERSION);
    const help = await amf(['--help']);
    expect(help.code).toBe(0);
    // Every command is registered even though each loads its module only when it runs.
    for (const command of ['up', 'worker', 'agents', 'audit', 'mcp', 'a2a', 'validate', 'run'])
      expect(help.stdout).toMatch(new RegExp(`\\n\\s+${command}\\b`));
  });

  it('amf agents says why when no coordinator answers (exit 1)', async () => {
    const run = await amf(['agents', '--coordinator', 'http://127.0.0.1:1']);
    expect(run.code).toBe(1);
    // Names the URL it could not reach, why, and what to do.
    expect(run.stderr).toMatch(
      /cannot reach the coordinator at http:\/\/127\.0\.0\.1:1 \(connection refused\)/,
    );
    expect(run.stderr).toMatch(/amf up/);
  });

  it.each([['--json'], ['-o', 'json'], ['--output', 'json']])(
    'amf agents %s prints parseable JSON',
    async (...flag) => {
      const run = await amf([
        'agents',
        ...flag,
        '--coordinator',
        mesh.url,
        '--data-dir',
        mesh.config.dataDir,
      ]);
      expect(run.code, run.stderr).toBe(0);
      const body = JSON.parse(run.stdout) as {
        agents: Array<{ agent_id: string; status: string; capability_tags: string[] }>;
      };
      expect(body.agents).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            agent_id: echo.worker.agentId,
            status: 'live',
            capability_tags: ['echo'],
          }),
        ]),
      );
    },
  );

  it('amf audit prints a header row, and -o json the records', async () => {
    const table = await amf(['audit', '--coordinator', mesh.url, '--data-dir', mesh.config.dataDir]);
    expect(table.code, table.stderr).toBe(0);
    // One MCP call through the coordinator's /mcp leaves one audit record.
    const client = new Client({ name: 'cli-audit-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${mesh.url}/mcp`), {
        requestInit: { headers: mesh.operatorHeaders() },
      }),
    );
    try {
      const { tools } = await client.listTools();
      const echoTool = tools.find((t) => t.name.endsWith('__echo'))?.name;
      expect(echoTool, JSON.stringify(tools.map((t) => t.name))).toBeDefined();
      await client.callTool({ name: echoTool!, arguments: { text: 'audited' } });
    } finally {
      await client.close();
    }
    const after = await mesh.waitFor(async () => {
      const run = await amf(['audit', '--coordinator', mesh.url, '--data-dir', mesh.config.dataDir]);
      return run.stdout.includes('echo') ? run : undefined;
    });
    const [header, ...rows] = after.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^TIME\s+DECISION\s+OUTCOME\s+DURATION\s+CALLER\s+TOOL$/);
    expect(rows.length).toBeGreaterThan(0);
    const json = await amf([
      'audit',
      '-o',
      'json',
      '--coordinator',
      mesh.url,
      '--data-dir',
      mesh.config.dataDir,
    ]);
    expect(json.code, json.stderr).toBe(0);
    const body = JSON.parse(json.stdout) as { records: Array<{ tool: string | null }> };
    expect(body.records.length).toBe(rows.length);
  });

  it('amf send streams the answer, and --no-stream waits for it', async () => {
    const streamed = await amf(['send', '--tag', 'echo', '--coordinator', mesh.url, 'hello', 'world']);
    expect(streamed.code, streamed.stderr).toBe(0);
    expect(streamed.stdout).toBe('hello world\n');
    const whole = await amf([
      'send',
      '--tag',
      'echo',
      '--no-stream',
      '--coordinator',
      mesh.url,
      'hello',
      'world',
    ]);
    expect(whole.code, whole.stderr).toBe(0);
    expect(whole.stdout).toBe('hello world\n');
    // Both really went through the mesh: two final results of the echo worker with that text.
    const finals = mesh.events.filter(
      (e) =>
        e.subject === 'amf.result.final' &&
        (e.event.data.payload as { agent_id?: string; result?: { text?: string } }).agent_id ===
          echo.worker.agentId &&
        (e.event.data.payload as { result?: { text?: string } }).result?.text === 'hello world',
    );
    expect(finals).toHaveLength(2);
  });

  it('amf send for a tag nobody serves exits 1 and names the model', async () => {
    const run = await amf(['send', '--tag', 'nope', '--coordinator', mesh.url, 'anyone?']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('amf/nope');
    expect(run.stderr).toContain('404');
  });

  it('amf publish sends a valid event that appears on the fabric', async () => {
    const run = await amf([
      'publish',
      'amf.evidence.publish',
      '--data',
      '{"note":"x"}',
      '--coordinator',
      mesh.url,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const reply = JSON.parse(run.stdout) as { accepted: boolean; id: string; subject: string };
    expect(reply).toMatchObject({ accepted: true, subject: 'amf.evidence.publish' });
    const seen = await mesh.waitForEvent((e) => e.event.id === reply.id, 10_000, 'the published event');
    expect(seen.subject).toBe('amf.evidence.publish');
    expect(seen.event.data.payload).toEqual({ note: 'x' });
  });

  it('amf publish refuses an unknown type and bad --data with exit 1', async () => {
    const bogus = await amf(['publish', 'amf.bogus', '--data', '{}', '--coordinator', mesh.url]);
    expect(bogus.code).toBe(1);
    expect(bogus.stderr).toContain('amf.bogus');
    const badData = await amf([
      'publish',
      'amf.evidence.publish',
      '--data',
      '{not json',
      '--coordinator',
      mesh.url,
    ]);
    expect(badData.code).toBe(1);
    expect(badData.stderr).toMatch(/--data is not valid JSON/);
  });

  it('amf doctor prints a report with a nats-server check', async () => {
    const dataDir = join(home, 'doctor-data');
    const run = await amf(['doctor', '--data-dir', dataDir]);
    expect([0, 1]).toContain(run.code);
    const lines = run.stdout.split('\n');
    // The mesh itself runs on nats-server, so the check must find it (a warning for a 2.9 server).
    expect(
      lines.find((l) => /^\S+ nats-server: /.test(l)),
      run.stdout,
    ).toMatch(/^[✓!] nats-server: nats-server \d+\.\d+\.\d+/);
    expect(lines.some((l) => l.includes('data-dir') && l.includes(dataDir))).toBe(true);
    // The exit code follows the report: 1 exactly when a check failed.
    expect(run.code).toBe(lines.some((l) => l.startsWith('✗')) ? 1 : 0);
  });

  /** Runs one streamed echo completion through the coordinator and returns its task id. */
  async function echoTask(text: string): Promise<string> {
    const res = await fetch(`${mesh.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: text }] }),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { id: string }).id.replace(/^chatcmpl-/, '');
  }

  /** Resolves once the fabric has carried a heartbeat after now (the CLI has had one to print). */
  async function nextHeartbeat(): Promise<void> {
    const from = mesh.events.length;
    await mesh.waitFor(
      () => mesh.events.slice(from).some((e) => e.event.type === 'amf.discovery.agent.heartbeat'),
      10_000,
      'a heartbeat',
    );
  }

  it('amf events prints one line per event (type, task, agent, summary), once each, no heartbeats', async () => {
    const events = spawnAmf(
      ['events', '--coordinator', mesh.url, '--data-dir', mesh.config.dataDir],
      cliEnv(),
    );
    try {
      await events.waitFor('stderr', /without heartbeats/);
      // The stream is open once the coordinator has a client for it: give it a heartbeat's time.
      await nextHeartbeat();
      const taskId = await echoTask('one line each');
      const short = taskId.slice(0, 8);
      const final = await events.waitFor('stdout', new RegExp(`amf\\.result\\.final\\s+${short}.*`));
      expect(final[0]).toMatch(/echo-cli\s+completed: "one line each"$/);
      await nextHeartbeat();
      const lines = events.out.stdout.split('\n').filter((l) => l.includes(short));
      // Exactly one announcement, claim and final for the task (the SSE stream once sent it twice).
      expect(
        lines.filter((l) => /\samf\.task\.announce\s/.test(l)),
        lines.join('\n'),
      ).toHaveLength(1);
      expect(lines.filter((l) => /\samf\.task\.claim\s/.test(l))).toHaveLength(1);
      expect(lines.filter((l) => /\samf\.result\.final\s/.test(l))).toHaveLength(1);
      const announce = lines.find((l) => /\samf\.task\.announce\s/.test(l))!;
      expect(announce).toMatch(
        /^\d\d:\d\d:\d\d\.\d{3} {2}amf\.task\.announce\s+[0-9a-f]{8} {2}\S+\s+echo: "one line each"$/,
      );
      // Short lines, not kilobytes of JSON; heartbeats only with --heartbeats.
      for (const l of events.out.stdout.trim().split('\n')) expect(l.length).toBeLessThan(200);
      expect(events.out.stdout).not.toContain('amf.discovery.agent.heartbeat');
    } finally {
      events.child.kill('SIGTERM');
      await events.exited;
    }
  });

  it('amf events --heartbeats includes them, and --json prints each whole event', async () => {
    const events = spawnAmf(
      ['events', '--json', '--heartbeats', '--coordinator', mesh.url, '--data-dir', mesh.config.dataDir],
      cliEnv(),
    );
    try {
      await events.waitFor('stdout', /"type":"amf\.discovery\.agent\.heartbeat"/);
      const taskId = await echoTask('whole events');
      await events.waitFor(
        'stdout',
        new RegExp(
          `"amf\\.result\\.final".*"amftaskid":"${taskId}"|"amftaskid":"${taskId}".*"amf\\.result\\.final"`,
        ),
      );
      const parsed = events.out.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { id: string; type: string; amftaskid?: string; data: unknown });
      const announces = parsed.filter((e) => e.type === 'amf.task.announce' && e.amftaskid === taskId);
      expect(announces).toHaveLength(1);
      expect(announces[0]!.data).toMatchObject({
        payload: { task: 'whole events', required_capability: 'echo' },
      });
    } finally {
      events.child.kill('SIGTERM');
      await events.exited;
    }
  });

  it('agent ids resolve from their short names: GET /agents/<name> and amf agents forget <name>', async () => {
    const detail = await mesh.fetch('/agents/echo-cli');
    expect(detail.status).toBe(200);
    expect(((await detail.json()) as { agent_id: string }).agent_id).toBe(echo.worker.agentId);
    const doomed = await mesh.startWorker('forget-me', ['forgettable'], echoHandler);
    const run = await amf([
      'agents',
      'forget',
      'forget-me',
      '--coordinator',
      mesh.url,
      '--data-dir',
      mesh.config.dataDir,
    ]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(`forgot ${doomed.worker.agentId}\n`);
    await doomed.close();
    const unknown = await amf([
      'agents',
      'forget',
      'nobody-here',
      '--coordinator',
      mesh.url,
      '--data-dir',
      mesh.config.dataDir,
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('HTTP 404');
    expect(unknown.stderr).toContain('nobody-here');
  });

  it('a short name two agents share is refused with both ids, and the full id still works', async () => {
    // An agent of another machine heard on mDNS with the same name: listed pending, not admitted.
    const twin = 'spiffe://lab/worker/echo-cli';
    mesh.coordinator.registry.listPending(
      { agent_id: twin, endpoint: 'http://192.0.2.7:8766', protocols_supported: ['A2A/1.0'] },
      { verified: false, reason: 'card_fetch_failed', message: 'not fetched in this test' },
      { source: '192.0.2.7' },
    );
    try {
      const run = await amf([
        'agents',
        'forget',
        'echo-cli',
        '--coordinator',
        mesh.url,
        '--data-dir',
        mesh.config.dataDir,
      ]);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('"echo-cli" names 2 agents');
      expect(run.stderr).toContain(`  - ${echo.worker.agentId}\n`);
      expect(run.stderr).toContain(`  - ${twin}\n`);
      expect(mesh.coordinator.registry.isLive(echo.worker.agentId)).toBe(true);
      const exact = await amf([
        'agents',
        'forget',
        twin,
        '--coordinator',
        mesh.url,
        '--data-dir',
        mesh.config.dataDir,
      ]);
      expect(exact.code, exact.stderr).toBe(0);
      expect(exact.stdout).toBe(`forgot ${twin}\n`);
    } finally {
      mesh.coordinator.registry.forget(twin);
    }
  });

  it('amf worker --port N that an agent holds fails naming it and the fix --port 0', async () => {
    const taken = new URL(echo.url).port;
    const run = await amf([
      'worker',
      '--name',
      'port-clash',
      '--tags',
      'clash',
      '--port',
      taken,
      '--coordinator',
      mesh.url,
      '--data-dir',
      mesh.config.dataDir,
      '--no-mdns',
    ]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      `port ${taken} on 127.0.0.1 is already in use by the AMF agent ${echo.worker.agentId}`,
    );
    expect(run.stderr).toContain('--port 0');
  });

  it('amf worker without --port takes any free port when 8766 is taken, and advertises the port it got', async () => {
    // Whoever holds 8766 (this test, or anything else in this network namespace), the worker must start.
    // It reads what probes send (and so sees them hang up): a socket never read keeps close() waiting.
    const holder: Server = createServer((socket) => socket.on('error', () => undefined).resume());
    await new Promise<void>((resolve) => {
      holder.once('error', () => resolve());
      holder.listen({ host: '127.0.0.1', port: 8766, exclusive: true }, () => resolve());
    });
    const worker = spawnAmf(
      [
        'worker',
        '--name',
        'port-free',
        '--tags',
        'portfree',
        '--coordinator',
        mesh.url,
        '--data-dir',
        mesh.config.dataDir,
        '--no-mdns',
      ],
      cliEnv(),
    );
    try {
      const note = await worker.waitFor(
        'stderr',
        /port 8766 is in use by .*: listening on any free port instead/,
      );
      expect(note[0]).toBeTruthy();
      const [, url, port] = await worker.waitFor('stdout', /at (http:\/\/127\.0\.0\.1:(\d+))\n/);
      expect(port).not.toBe('8766');
      const agentId = 'spiffe://local/worker/port-free';
      await mesh.waitFor(() => mesh.coordinator.registry.isLive(agentId), 20_000, 'port-free admitted');
      // The advertisement and the card name the port it got.
      expect(mesh.coordinator.registry.get(agentId)!.record.endpoint).toBe(url);
      const card = (await (await fetch(`${url}/.well-known/agent-card.json`)).json()) as { url?: string };
      expect(JSON.stringify(card)).toContain(`:${port}`);
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
      await new Promise<void>((resolve) => (holder.listening ? holder.close(() => resolve()) : resolve()));
    }
  });
});
