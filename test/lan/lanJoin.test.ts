/**
 * Across machines, on a simulated LAN (test/helpers/lanSim.ts: four network namespaces on a bridge):
 * the coordinator on host1 started with `--host`, an honest worker on host2 joining with nothing but
 * an invite, a client on host3, and a stranger on host4. Everything runs as the built CLI
 * (bin/amf.js → dist/), as a user would run it on four machines.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canSimulateLan, startLan, type Lan, type LanHost } from '../../scripts/lib/lanSim.mjs';
import {
  chat,
  fetchFrom,
  inviteOn,
  invitedWorkerArgs,
  ROOT,
  runAmf,
  startAmf,
  startLanCoordinator,
} from '../helpers/lanAmf.js';

const COORDINATOR = 'http://10.77.0.1:8765';

describe('a LAN mesh joined by invite', () => {
  let lan: Lan;
  let home: string;
  let coordinatorDir: string;
  let workerDir: string;
  let operatorKey: string;
  const started: ChildProcess[] = [];
  let h1: LanHost, h2: LanHost, h3: LanHost;

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/cli/main.js'))) throw new Error('dist/ is missing: run npm run build');
    if (!canSimulateLan())
      throw new Error(
        'the LAN tests need root, unshare and nsenter (scripts/test.sh runs them inside unshare -n as root)',
      );
    lan = startLan(4);
    [h1, h2, h3] = lan.hosts as [LanHost, LanHost, LanHost];
    home = await mkdtemp(join(tmpdir(), 'amf-lan-'));
    coordinatorDir = join(home, 'host1');
    workerDir = join(home, 'host2');
    const coordinator = await startLanCoordinator(h1, coordinatorDir, home);
    started.push(coordinator.child);
    operatorKey = coordinator.operatorKey;
  }, 60_000);

  afterAll(async () => {
    for (const child of started) child.kill('SIGTERM');
    await Promise.all(
      started.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.once('exit', r)))),
    );
    lan?.close();
    if (home) await rm(home, { recursive: true, force: true });
  }, 30_000);

  it('the coordinator advertises its LAN address, never 127.0.0.1, in its card', async () => {
    const card = await fetchFrom(h3, `${COORDINATOR}/.well-known/agent-card.json`);
    expect(card.status).toBe(200);
    expect(card.body).toContain('nats://10.77.0.1:4222');
    expect(card.body).not.toContain('127.0.0.1');
    expect((await stat(join(coordinatorDir, 'operator.key'))).mode & 0o777).toBe(0o600);
  });

  it('a worker on another host joins with one invite, and serves a client on a third host', async () => {
    const token = await inviteOn(h1, coordinatorDir, COORDINATOR, home, 'echo');
    const worker = await startAmf(
      h2,
      invitedWorkerArgs({ name: 'w2', tags: 'echo', host: h2, dataDir: workerDir, invite: token }),
      /AMF worker .* serving echo/,
      home,
    );
    started.push(worker.child);
    // From a third host: the client route needs the key beyond loopback, and then reaches host2.
    const refused = await fetchFrom(h3, `${COORDINATOR}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: chat('no key'),
    });
    expect(refused.status).toBe(401);
    let answer = { status: 0, body: '' };
    for (let i = 0; i < 50 && answer.status !== 200; i++) {
      answer = await fetchFrom(h3, `${COORDINATOR}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${operatorKey}` },
        body: chat('across the LAN'),
      });
      if (answer.status !== 200) await new Promise((r) => setTimeout(r, 200));
    }
    expect(answer.status, answer.body).toBe(200);
    expect(answer.body).toContain('across the LAN');
    const agents = await fetchFrom(h1, `${COORDINATOR}/agents`, {
      headers: { authorization: `Bearer ${operatorKey}` },
    });
    const w2 = (
      JSON.parse(agents.body) as { agents: { agent_id: string; status: string; endpoint: string }[] }
    ).agents.find((a) => a.agent_id.endsWith('/w2'));
    expect(w2?.status).toBe('live');
    expect(w2?.endpoint).toContain(h2.address);
  }, 90_000);

  it('an invite is used once: a second key presenting it is refused, and says so', async () => {
    const token = await inviteOn(h1, coordinatorDir, COORDINATOR, home, 'echo');
    const first = await startAmf(
      h2,
      invitedWorkerArgs({ name: 'w2b', tags: 'echo', host: h2, dataDir: workerDir, invite: token }),
      /AMF worker .* serving echo/,
      home,
    );
    started.push(first.child);
    const second = await runAmf(
      h3,
      invitedWorkerArgs({
        name: 'thief',
        tags: 'echo',
        host: h3,
        dataDir: join(home, 'host3'),
        invite: token,
      }),
      home,
    );
    expect(second.code).not.toBe(0);
    expect(second.stderr).toContain('already used');
  }, 90_000);

  it('an invite for other tags does not let the joiner serve more', async () => {
    const token = await inviteOn(h1, coordinatorDir, COORDINATOR, home, 'calc');
    const run = await runAmf(
      h3,
      invitedWorkerArgs({
        name: 'wide',
        tags: 'echo',
        host: h3,
        dataDir: join(home, 'host3'),
        invite: token,
      }),
      home,
    );
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('allows tags calc');
  }, 60_000);

  it('a worker bound to loopback is told which --host to use instead of joining unverified', async () => {
    const token = await inviteOn(h1, coordinatorDir, COORDINATOR, home);
    const run = await runAmf(
      h3,
      invitedWorkerArgs({ name: 'local-only', tags: 'echo', dataDir: join(home, 'host3'), invite: token }),
      home,
    );
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain(`--host ${h3.address}`);
  }, 60_000);

  it('a worker pointed at a NATS nobody serves names the URL and the likely fix', async () => {
    const run = await runAmf(
      h3,
      [
        'worker',
        '--name',
        'lost',
        '--tags',
        'echo',
        '--handler',
        'echo',
        '--host',
        h3.address,
        '--port',
        '0',
        '--data-dir',
        coordinatorDir,
        '--no-mdns',
        '--nats-url',
        'nats://10.77.0.1:4999',
        '--coordinator',
        COORDINATOR,
      ],
      home,
    );
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('nats://10.77.0.1:4999');
    expect(run.stderr).toContain('--host');
  }, 60_000);
});
