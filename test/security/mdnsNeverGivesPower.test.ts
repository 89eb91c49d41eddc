// mDNS never gives power (issue 28 part 2, issue 29 parts 3 and 5; attacks H2, M1, M2, M5): each
// attack done as a stranger on the LAN would do it — real multicast packets from this process
// (inside the test run's private network namespace), replays through an admitted agent's own NATS
// login — against a real coordinator, nats-server and OPA. Every attack worked before the fix: a
// stranger's advertisement was live in milliseconds, an mDNS goodbye took a key-bound agent offline,
// an advertisement with the victim's key moved its endpoint, any card URL was fetched, replayed
// goodbyes and heartbeats were believed, and a live agent could not be forgotten.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsConnection } from '@nats-io/transport-node';
import { createEvent, type AmfEvent } from '../../src/events/cloudEvent.js';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { connectAs, connectAsAgent, NatsAuthError } from '../../src/fabric/connect.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { createEphemeralAgentKey, type AgentKey } from '../../src/identity/agentKey.js';
import { signEvent } from '../../src/identity/eventSignature.js';
import { startMdnsAdvertiser, type MdnsAdvertiser } from '../../src/discovery/mdns/advertiser.js';
import { agentRecordToTxt } from '../../src/discovery/txtRecord.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { MeshWorker } from '../../src/worker/meshWorker.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { AgentRegistry } from '../../src/registry/agentRegistry.js';
import { EnrollmentStore } from '../../src/coordinator/enrollmentStore.js';
import { onlyLoopback } from '../discovery/mdnsTestKit.js';
import { startTestMesh, type ObservedEvent, type TestMesh } from '../helpers/meshFixture.js';

const payloadOf = (e: ObservedEvent) =>
  e.event.data.payload as {
    reason?: string;
    agent_id?: string;
    message?: string;
    details?: { reasons?: string[]; door?: string; claimed_agent?: string };
  };

/** A small HTTP site standing in for an agent's (or an attacker's) host: serves a card, counts hits. */
interface Site {
  base: string;
  port: number;
  hits: string[];
  server: Server;
}

describe.skipIf(!onlyLoopback())('mDNS never gives power (private network namespace)', () => {
  let mesh: TestMesh;
  const run = randomBytes(3).toString('hex');
  const advertisers: MdnsAdvertiser[] = [];
  const sites: Server[] = [];
  const connections: NatsConnection[] = [];
  const workers: Array<RunningWorker | MeshWorker> = [];

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { mdns: { enabled: true, interface: '127.0.0.1' } } });
    await mesh.coordinator.startDiscovery(mesh.url);
  });
  afterAll(async () => {
    await Promise.allSettled(advertisers.map((a) => a.close()));
    await Promise.allSettled(workers.map((w) => (w instanceof MeshWorker ? w.drain(1000) : w.close(1000))));
    await Promise.allSettled(connections.map((c) => c.close()));
    await Promise.allSettled(sites.map((s) => new Promise((resolve) => s.close(resolve))));
    await mesh?.close();
  });

  const registry = () => mesh.coordinator.registry;

  /**
   * `host`: the attacker's site listens on a loopback address of its own, so a request another test
   * file running alongside sends to a port it used before cannot land there and pass for one of ours.
   */
  async function site(agentId: string, host = '127.0.0.1'): Promise<Site> {
    const hits: string[] = [];
    let base = '';
    const server = createServer((req, res) => {
      hits.push(req.url ?? '');
      if (req.url === '/.well-known/agent-card.json') {
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({ name: agentId.split('/').pop(), url: base, 'x-amf': { agent_id: agentId } }),
        );
        return;
      }
      res.statusCode = 404;
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    sites.push(server);
    const port = (server.address() as AddressInfo).port;
    base = `http://${host}:${port}`;
    return { base, port, hits, server };
  }

  async function advertise(instanceName: string, port: number, txt: Record<string, string>) {
    const advertiser = await startMdnsAdvertiser({
      instanceName,
      port,
      txt,
      interfaceAddress: '127.0.0.1',
    });
    advertisers.push(advertiser);
    return advertiser;
  }

  function recordOf(id: string, base: string, tags: string[], key?: AgentKey): AgentRecord {
    return {
      agent_id: id,
      endpoint: base,
      protocols_supported: ['A2A/1.0'],
      capability_tags: tags,
      trust_domain: 'local',
      visibility: 'local',
      version: '0.1.0',
      status: 'active',
      card_url: `${base}/.well-known/agent-card.json`,
      ...(key ? { nkey: key.publicKey } : {}),
    };
  }

  /**
   * mDNS packets are handled in the order they arrive: once a later stranger is listed, everything
   * sent before it has been handled (so "nothing happened" is observed, not waited for).
   */
  async function afterEverythingSent(label: string): Promise<void> {
    const id = `spiffe://local/worker/sentinel-${label}-${run}`;
    const s = await site(id);
    const sentinel = await advertise(
      `sentinel-${label}-${run}`,
      s.port,
      agentRecordToTxt(recordOf(id, s.base, ['sentinel'])),
    );
    await mesh.waitFor(() => registry().get(id)?.status === 'pending', 20_000, `sentinel ${label} listed`);
    await sentinel.close();
  }

  const denyOf = (id: string, reason: string) =>
    mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.deny' &&
        payloadOf(e).agent_id === id &&
        [payloadOf(e).reason, ...(payloadOf(e).details?.reasons ?? [])].includes(reason),
      20_000,
      `deny of ${id} (${reason})`,
    );

  const warningOf = (reason: string, claimed: string) =>
    mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.warning' &&
        payloadOf(e).reason === reason &&
        (payloadOf(e).details?.claimed_agent === claimed || payloadOf(e).agent_id === claimed),
      15_000,
      `${reason} warning about ${claimed}`,
    );

  const stranger = { key: createEphemeralAgentKey(), name: `stranger-${run}`, tag: `lab-${run}` };
  const strangerId = `spiffe://local/worker/${stranger.name}`;
  let strangerSite: Site;

  it("a stranger's advertisement is listed pending: no NATS user, no task", async () => {
    strangerSite = await site(strangerId);
    const record = recordOf(strangerId, strangerSite.base, [stranger.tag], stranger.key);
    await advertise(stranger.name, strangerSite.port, agentRecordToTxt(record));
    await mesh.waitFor(() => registry().get(strangerId)?.status === 'pending', 20_000, 'the stranger listed');
    expect(registry().isLive(strangerId)).toBe(false);
    expect(registry().boundKey(strangerId)).toBeUndefined();
    await mesh.coordinator.grants!.settled();
    expect(mesh.coordinator.grants!.current().map((u) => u.nkey)).not.toContain(stranger.key.publicKey);
    await expect(
      connectAsAgent(mesh.coordinator.natsUrl, stranger.key, 'stranger', { maxReconnectAttempts: 0 }),
    ).rejects.toBeInstanceOf(NatsAuthError);
    await expect(
      mesh.coordinator.dispatcher.submit({ tag: stranger.tag, task: 'secret prompt 3', timeoutMs: 3000 }),
    ).rejects.toMatchObject({ code: 'NO_AGENT_FOR_TAG' });
    const listed = (await (await mesh.fetch('/agents')).json()) as {
      agents: Array<{ agent_id: string; status: string }>;
    };
    expect(listed.agents.find((a) => a.agent_id === strangerId)?.status).toBe('pending');
    const detail = (await (await mesh.fetch(`/agents/${encodeURIComponent(strangerId)}`)).json()) as {
      heard_from?: { source: string; instance?: string };
    };
    expect(detail.heard_from).toMatchObject({ source: '127.0.0.1', instance: stranger.name });
  }, 60_000);

  it('approved by the operator, it connects with its key, heartbeats on NATS and serves', async () => {
    // A listing that names another key by now is not approved by mistake.
    const wrong = await mesh.fetch(`/agents/${encodeURIComponent(strangerId)}/approve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ nkey: createEphemeralAgentKey().publicKey }),
    });
    expect(wrong.status).toBe(400);
    const res = await mesh.fetch(`/agents/${encodeURIComponent(strangerId)}/approve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ nkey: stranger.key.publicKey }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      approved: strangerId,
      status: 'offline',
      enrollment: {
        nkey: stranger.key.publicKey,
        agent_id: strangerId,
        via: 'approval',
        tags: [stranger.tag],
      },
    });
    expect(registry().boundKey(strangerId)).toBe(stranger.key.publicKey);
    // Stored in the shared bucket: a restarted coordinator grants the key again.
    const stored = await mesh.coordinator.stores.enrollments.get(stranger.key.publicKey);
    expect(stored?.json()).toMatchObject({ agent_id: strangerId, via: 'approval' });
    const restarted = new AgentRegistry({ defaultHeartbeatSeconds: 1, offlineAfterMissed: 3 });
    const store = new EnrollmentStore(mesh.coordinator.stores.enrollments, restarted, () => undefined);
    await store.start();
    expect(restarted.grantedKeys().get(stranger.key.publicKey)).toMatchObject({ agentId: strangerId });
    expect(restarted.boundKey(strangerId)).toBe(stranger.key.publicKey);
    store.close();

    // No join credential: it dials with its own key until its user exists (at once, once approved).
    const nc = await mesh.waitFor(
      () =>
        connectAsAgent(mesh.coordinator.natsUrl, stranger.key, 'approved-stranger', {
          maxReconnectAttempts: 0,
        }).catch(() => undefined),
      10_000,
      'its NATS user',
    );
    connections.push(nc);
    const worker = new MeshWorker(nc, {
      name: stranger.name,
      tags: [stranger.tag],
      trustDomain: 'local',
      endpoint: strangerSite.base,
      handler: echoHandler,
      heartbeatSeconds: 1,
      concurrency: 4,
      key: stranger.key,
      // Logged in as its key's own user: its task events and finals go on its key's subjects.
      ownSubjects: true,
    });
    workers.push(worker);
    await worker.start();
    await mesh.waitFor(() => registry().isLive(strangerId), 20_000, 'the approved agent live');
    const answer = await mesh.coordinator.dispatcher.submit({
      tag: stranger.tag,
      task: 'approved now',
      timeoutMs: 10_000,
    });
    expect(answer).toMatchObject({ text: 'approved now', agentId: strangerId });
  }, 60_000);

  it("an mDNS goodbye, the victim's key with another endpoint, or another key change nothing for a key-bound agent", async () => {
    const victim = await mesh.startWorker(`victim-${run}`, [`victim-${run}`], echoHandler);
    workers.push(victim);
    const victimId = victim.worker.agentId;
    const before = registry().get(victimId)!.record;
    expect(before.nkey).toBe(victim.worker.key.publicKey);

    // Its public key replayed with the attacker's own endpoint, card and MCP URL.
    const evil = await site(victimId, `127.${1 + (randomBytes(1)[0]! % 250)}.${randomBytes(1)[0]}.7`);
    const moved = await advertise(`imp-${run}`, evil.port, {
      ...agentRecordToTxt({
        ...before,
        endpoint: evil.base,
        card_url: `${evil.base}/.well-known/agent-card.json`,
        protocols_supported: ['A2A/1.0', 'MCP/2025-11-25'],
        mcp_endpoint: `${evil.base}/mcp`,
      }),
    });
    await denyOf(victimId, 'mdns_not_authoritative');
    // Another key for the bound id.
    const rekeyed = await advertise(
      `imp-key-${run}`,
      evil.port,
      agentRecordToTxt({ ...before, nkey: createEphemeralAgentKey().publicKey }),
    );
    await denyOf(victimId, 'agent_key_mismatch');
    // Then TTL-0 goodbyes for both instances, which named the victim's id.
    await moved.close();
    await rekeyed.close();
    await afterEverythingSent('goodbye');

    const now = registry().get(victimId)!;
    expect(now.status).toBe('live');
    expect(now.record.endpoint).toBe(before.endpoint);
    expect(now.record.mcp_endpoint).toBe(before.mcp_endpoint);
    expect(registry().boundKey(victimId)).toBe(before.nkey);
    expect(evil.hits).toEqual([]); // nothing fetched from the attacker's host
    expect(victim.nc.isClosed()).toBe(false);
    const answer = await mesh.coordinator.dispatcher.submit({
      tag: `victim-${run}`,
      task: 'still here',
      timeoutMs: 10_000,
    });
    expect(answer).toMatchObject({ text: 'still here', agentId: victimId });
  }, 60_000);

  it('refuses card and MCP URLs off the fixed paths of the sender, and fetches nothing', async () => {
    const id = `spiffe://local/worker/ssrf-${run}`;
    const target = await site(id);
    await advertise(`ssrf-card-${run}`, target.port, {
      ...agentRecordToTxt(recordOf(id, target.base, ['probe'])),
      card: `${target.base}/admin/reset?all=1`,
    });
    const cardDeny = await denyOf(id, 'card_url_refused');
    expect(payloadOf(cardDeny).message).toMatch(/\/\.well-known\/agent-card\.json/);
    const mcpId = `spiffe://local/worker/ssrf-mcp-${run}`;
    await advertise(`ssrf-mcp-${run}`, target.port, {
      ...agentRecordToTxt(recordOf(mcpId, target.base, ['probe'])),
      proto: 'A2A/1.0,MCP/2025-11-25',
      // The coordinator's own OpenAI route, as an MCP URL.
      mcp: `${mesh.url}/v1/chat/completions`,
    });
    await denyOf(mcpId, 'mcp_url_refused');
    await afterEverythingSent('ssrf');
    expect(target.hits).toEqual([]);
    expect(registry().get(id)).toBeUndefined();
    expect(registry().get(mcpId)).toBeUndefined();
  }, 60_000);

  it("refuses and warns a replay of an agent's heartbeat or goodbye through another agent's own login", async () => {
    const mallory = await mesh.startWorker(`mallory-${run}`, [`mallory-${run}`], echoHandler);
    workers.push(mallory);
    const key = createEphemeralAgentKey();
    const start = () =>
      startWorker({
        name: `w1-${run}`,
        tags: [`w1-${run}`],
        handler: echoHandler,
        natsUrl: mesh.coordinator.natsUrl,
        join: mesh.coordinator.joinCredential,
        key,
        port: 0,
        heartbeatSeconds: 1,
      });
    const first = await start();
    const w1 = first.worker.agentId;
    await mesh.waitFor(() => registry().isLive(w1), 10_000, 'w1 live');
    // Its goodbye, as anyone reading the event stream sees it.
    await first.close(1000);
    const goodbye = await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.discovery.agent.heartbeat' &&
        payloadOf(e).agent_id === w1 &&
        (e.event.data.payload as { status?: string }).status === 'offline',
      10_000,
      "w1's goodbye",
    );
    await mesh.waitFor(() => registry().get(w1)?.status === 'offline', 10_000, 'w1 offline');
    const second = await start();
    workers.push(second);
    await mesh.waitFor(() => registry().isLive(w1), 10_000, 'w1 back');
    const offlines: string[] = [];
    const unwatch = registry().onChange((c) => {
      if (c.kind === 'offline' && c.agent.record.agent_id === w1) offlines.push(c.reason);
    });
    // Replayed through mallory's own NATS user, which may publish heartbeats.
    mallory.nc.publish('amf.discovery.agent.heartbeat', JSON.stringify(goodbye.event));
    await warningOf('replayed_event', w1);
    const beat = await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.discovery.agent.heartbeat' &&
        payloadOf(e).agent_id === w1 &&
        (e.event.data.payload as { status?: string }).status === 'active' &&
        Date.parse(e.event.time) > Date.parse(goodbye.event.time),
      10_000,
      "w1's heartbeat",
    );
    mallory.nc.publish('amf.discovery.agent.heartbeat', JSON.stringify(beat.event));
    await mallory.nc.flush();
    // Heartbeats after both replays keep coming: w1 was never offline in between.
    await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.discovery.agent.heartbeat' &&
        payloadOf(e).agent_id === w1 &&
        Date.parse(e.event.time) > Date.parse(beat.event.time) + 1500,
      10_000,
      'later heartbeats',
    );
    unwatch();
    expect(offlines).toEqual([]);
    expect(registry().isLive(w1)).toBe(true);
    expect(
      mesh.events.filter(
        (e) =>
          e.subject === 'amf.policy.warning' &&
          payloadOf(e).reason === 'replayed_event' &&
          payloadOf(e).details?.claimed_agent === w1,
      ).length,
    ).toBeGreaterThanOrEqual(1);
  }, 90_000);

  it("replayed 'active' heartbeats do not keep a hung agent live", async () => {
    const mallory = await mesh.startWorker(`mallory2-${run}`, [`mallory2-${run}`], echoHandler);
    workers.push(mallory);
    const key = createEphemeralAgentKey();
    const id = `spiffe://local/worker/hung-${run}`;
    const join = await connectAs(mesh.coordinator.natsUrl, mesh.coordinator.joinCredential, 'hung-join');
    connections.push(join);
    const bus = new EventBus(join);
    const record: AgentRecord = {
      ...recordOf(id, 'http://127.0.0.1:9', [`hung-${run}`], key),
      heartbeat_seconds: 1,
    };
    delete record.card_url;
    const heartbeat = (): AmfEvent =>
      signEvent(
        createEvent({
          type: 'amf.discovery.agent.heartbeat',
          sender: { identity: id, source: 'http://127.0.0.1:9', role: 'specialist', trustDomain: 'local' },
          payload: record,
        }),
        key,
      );
    let last = heartbeat();
    bus.publish(last);
    const beating = setInterval(() => {
      last = heartbeat();
      bus.publish(last);
    }, 300);
    try {
      await mesh.waitFor(() => registry().isLive(id), 10_000, 'the agent live');
    } finally {
      clearInterval(beating); // it hangs: no more heartbeats of its own
    }
    const wire = JSON.stringify(last);
    const replaying = setInterval(() => mallory.nc.publish('amf.discovery.agent.heartbeat', wire), 200);
    try {
      // 3 missed 1 s heartbeats, with a margin: replays would have kept it live indefinitely.
      await mesh.waitFor(() => registry().get(id)?.status === 'offline', 10_000, 'the hung agent offline');
    } finally {
      clearInterval(replaying);
    }
    await warningOf('replayed_event', id);
  }, 60_000);

  it('the operator forgets a live impostor: unbound, its NATS user gone, disconnected', async () => {
    const id = `spiffe://local/worker/taken-${run}`;
    const impostorKey = createEphemeralAgentKey();
    const join = await connectAs(mesh.coordinator.natsUrl, mesh.coordinator.joinCredential, 'impostor-join');
    connections.push(join);
    const record: AgentRecord = {
      ...recordOf(id, 'http://127.0.0.1:9', [`taken-${run}`], impostorKey),
      heartbeat_seconds: 5,
    };
    delete record.card_url;
    new EventBus(join).publish(
      signEvent(
        createEvent({
          type: 'amf.discovery.agent.heartbeat',
          sender: { identity: id, source: 'http://127.0.0.1:9', role: 'specialist', trustDomain: 'local' },
          payload: record,
        }),
        impostorKey,
      ),
    );
    await mesh.waitFor(() => registry().isLive(id), 10_000, 'the impostor live');
    // Its NATS user is in the server's config once the grants have settled (a reload, slow under load).
    await mesh.coordinator.grants!.settled();
    const own = await mesh.waitFor(
      () =>
        connectAsAgent(mesh.coordinator.natsUrl, impostorKey, 'impostor', { maxReconnectAttempts: 0 }).catch(
          () => undefined,
        ),
      30_000,
      "the impostor's own login",
    );
    connections.push(own);

    const res = await mesh.fetch(`/agents/${encodeURIComponent(id)}`, { method: 'DELETE' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ forgotten: id, was: 'live' });
    expect(registry().get(id)).toBeUndefined();
    expect(registry().boundKey(id)).toBeUndefined();
    await mesh.coordinator.grants!.settled();
    expect(mesh.coordinator.grants!.current().map((u) => u.nkey)).not.toContain(impostorKey.publicKey);
    await mesh.waitFor(() => own.isClosed(), 10_000, "the impostor's connection closed");

    // The id is free again: the honest agent binds its own key.
    const honest = await startWorker({
      name: `taken-${run}`,
      tags: [`taken-${run}`],
      handler: echoHandler,
      natsUrl: mesh.coordinator.natsUrl,
      join: mesh.coordinator.joinCredential,
      port: 0,
      heartbeatSeconds: 1,
    });
    workers.push(honest);
    await mesh.waitFor(() => registry().isLive(id), 10_000, 'the honest agent live');
    expect(registry().boundKey(id)).toBe(honest.worker.key.publicKey);
  }, 60_000);
});
