/**
 * A stranger on the LAN (host3, no credential at all) against a coordinator on host1 and an honest
 * worker on host2 that joined by invite and advertises itself on mDNS. The stranger sends real mDNS
 * packets across the bridge, as the tester's rogue host did:
 * - a new agent of the honest worker's tag: listed `pending`, no NATS user, and every prompt still
 *   answered by the honest worker (before: admitted live in 17 ms, answered 2 of 8 prompts);
 * - an instance naming the honest worker's id, then its goodbye: the worker stays live and served
 *   (before: marked offline, its connections closed, 66 of 100 requests 404);
 * - the honest worker's key with the stranger's own endpoint: refused, MCP calls still reach host2;
 * - a card URL on the coordinator's own address (SSRF): refused at validation, nothing fetched.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { nkeys } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canSimulateLan, startLan, type Lan, type LanHost } from '../../scripts/lib/lanSim.mjs';
import {
  chat,
  fetchFrom,
  inviteOn,
  invitedWorkerArgs,
  ROOT,
  startAmf,
  startLanCoordinator,
} from '../helpers/lanAmf.js';

const COORDINATOR = 'http://10.77.0.1:8765';

interface AgentView {
  agent_id: string;
  status: string;
  endpoint?: string;
  nkey?: string;
}

/**
 * Advertises `record` on mDNS from `host` for `holdMs`, then says goodbye (TTL 0): a node process
 * using the project's own advertiser (dist/), which speaks plain DNS-SD.
 */
function advertiseFrom(
  host: LanHost,
  instance: string,
  txt: Record<string, string>,
  holdMs: number,
): Promise<void> {
  const advertiser = pathToFileURL(join(ROOT, 'dist/discovery/mdns/advertiser.js')).href;
  const script = `
    const { startMdnsAdvertiser } = await import(${JSON.stringify(advertiser)});
    const ad = await startMdnsAdvertiser({ instanceName: ${JSON.stringify(instance)}, port: 9999,
      txt: ${JSON.stringify(txt)}, interfaceAddress: ${JSON.stringify(host.address)}, onError: () => {} });
    await new Promise((r) => setTimeout(r, ${holdMs}));
    await ad.close();`;
  const child = host.spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'inherit' });
  return new Promise((resolve, reject) =>
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`advertiser exited ${code}`)))),
  );
}

describe('a stranger on the LAN gets nothing', () => {
  let lan: Lan;
  let home: string;
  let coordinatorDir: string;
  let operatorKey: string;
  let honest: AgentView;
  const started: ChildProcess[] = [];
  let h1: LanHost, h2: LanHost, h3: LanHost;

  const agents = async (): Promise<AgentView[]> => {
    const res = await fetchFrom(h1, `${COORDINATOR}/agents`, {
      headers: { authorization: `Bearer ${operatorKey}` },
    });
    return (JSON.parse(res.body) as { agents: AgentView[] }).agents;
  };
  const ask = (text: string) =>
    fetchFrom(h1, `${COORDINATOR}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${operatorKey}` },
      body: chat(text),
    });

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/cli/main.js'))) throw new Error('dist/ is missing: run npm run build');
    if (!canSimulateLan())
      throw new Error('the LAN tests need root, unshare and nsenter (scripts/test.sh runs them as root)');
    lan = startLan(3, '10.77.0');
    [h1, h2, h3] = lan.hosts as [LanHost, LanHost, LanHost];
    home = await mkdtemp(join(tmpdir(), 'amf-lan-rogue-'));
    coordinatorDir = join(home, 'host1');
    const coordinator = await startLanCoordinator(h1, coordinatorDir, home);
    started.push(coordinator.child);
    operatorKey = coordinator.operatorKey;
    const token = await inviteOn(h1, coordinatorDir, COORDINATOR, home, 'echo');
    const worker = await startAmf(
      h2,
      invitedWorkerArgs({
        name: 'honest',
        tags: 'echo',
        host: h2,
        port: '8766',
        dataDir: join(home, 'host2'),
        invite: token,
        mdns: true,
      }),
      /AMF worker .* serving echo/,
      home,
    );
    started.push(worker.child);
    for (let i = 0; i < 100; i++) {
      const found = (await agents()).find((a) => a.agent_id.endsWith('/honest'));
      if (found?.status === 'live') {
        honest = found;
        break;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(honest?.status).toBe('live');
  }, 90_000);

  afterAll(async () => {
    for (const child of started) child.kill('SIGTERM');
    await Promise.all(
      started.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.once('exit', r)))),
    );
    lan?.close();
    if (home) await rm(home, { recursive: true, force: true });
  }, 30_000);

  it('a new agent advertised over mDNS is pending, gets no task, and every prompt reaches the honest worker', async () => {
    const advertising = advertiseFrom(
      h3,
      'rogue',
      {
        id: 'spiffe://local/worker/rogue',
        ep: `http://${h3.address}:9999`,
        proto: 'A2A/1.0',
        tags: 'echo',
        td: 'local',
        vis: 'local',
        v: '1.0.0',
        card: `http://${h3.address}:9999/.well-known/agent-card.json`,
        // A key of the stranger's own: proving it holds it would change nothing without an invite.
        nk: nkeys.createUser().getPublicKey(),
      },
      30_000,
    );
    let rogue: AgentView | undefined;
    // Judged like any advertisement (watcher, policy, card fetch): seconds on a loaded machine.
    for (let i = 0; i < 200 && !rogue; i++) {
      rogue = (await agents()).find((a) => a.agent_id === 'spiffe://local/worker/rogue');
      if (!rogue) await new Promise((r) => setTimeout(r, 100));
    }
    expect(rogue?.status).toBe('pending');
    for (let i = 0; i < 8; i++) {
      const answer = await ask(`secret prompt ${i}`);
      expect(answer.status, answer.body).toBe(200);
      expect(answer.body).toContain(`secret prompt ${i}`);
    }
    await advertising;
  }, 60_000);

  it("an mDNS goodbye naming the honest worker's id changes nothing", async () => {
    // The stranger advertises an instance with the victim's id (and its public key), then leaves.
    await advertiseFrom(
      h3,
      'honest-impostor',
      {
        id: honest.agent_id,
        ep: `http://${h3.address}:9999`,
        proto: 'A2A/1.0',
        tags: 'echo',
        td: 'local',
        vis: 'local',
        v: '1.0.0',
        card: `http://${h3.address}:9999/.well-known/agent-card.json`,
        ...(honest.nkey ? { nk: honest.nkey } : {}),
      },
      1_500,
    );
    let failures = 0;
    for (let i = 0; i < 20; i++) {
      const answer = await ask(`after goodbye ${i}`);
      if (answer.status !== 200) failures++;
    }
    expect(failures).toBe(0);
    const view = (await agents()).find((a) => a.agent_id === honest.agent_id);
    expect(view?.status).toBe('live');
    expect(view?.endpoint).toContain(h2.address);
  }, 60_000);

  it("a card URL on the coordinator's own address is refused at validation", async () => {
    await advertiseFrom(
      h3,
      'ssrf',
      {
        id: 'spiffe://local/worker/ssrf',
        ep: `http://${h3.address}:9999`,
        proto: 'A2A/1.0',
        tags: 'ssrf',
        td: 'local',
        vis: 'local',
        v: '1.0.0',
        card: `http://${h1.address}:8765/agents`,
      },
      2_000,
    );
    const res = await fetchFrom(h1, `${COORDINATOR}/admissions?limit=200`, {
      headers: { authorization: `Bearer ${operatorKey}` },
    });
    expect(res.body).toContain('card_url_refused');
    expect((await agents()).some((a) => a.agent_id === 'spiffe://local/worker/ssrf')).toBe(false);
  }, 60_000);
});
