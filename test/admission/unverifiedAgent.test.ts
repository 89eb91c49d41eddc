// Admission tried as an attacker: an agent whose card cannot be fetched, or whose card describes
// someone else, is not admitted as if verified. It is listed `unverified` in /agents with the
// reason, and offered nothing: no tasks for its tag, no OpenAI model, no advertisement to the mesh.
// Once its card checks out (a re-advertisement judged again), it becomes live.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEvent, type EventSender } from '../../src/events/cloudEvent.js';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import type { PolicyPayload } from '../../src/events/payloads.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

interface AgentRow {
  agent_id: string;
  status: string;
  unverified?: { reason: string; message: string };
}

/** An agent's HTTP side on 127.0.0.1: answers its card path with whatever `card()` says now. */
async function cardServer(card: () => { status: number; body?: unknown }) {
  const server = http.createServer((req, res) => {
    const answer = card();
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(answer.body === undefined ? '{"error":"not found"}' : JSON.stringify(answer.body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('admission of an agent whose card does not check out', () => {
  let mesh: TestMesh;
  let bus: EventBus;
  const servers: Array<{ close(): Promise<void> }> = [];

  beforeAll(async () => {
    mesh = await startTestMesh();
    bus = new EventBus(await mesh.connect('specialist', 'advertiser'));
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    await mesh?.close();
  });

  const advertise = (rec: AgentRecord) => {
    const sender: EventSender = {
      identity: rec.agent_id,
      source: 'urn:test',
      role: 'specialist',
      trustDomain: 'local',
    };
    bus.publish(createEvent({ type: 'amf.discovery.agent.heartbeat', sender, payload: rec }));
  };

  const agentsRow = async (agentId: string): Promise<AgentRow | undefined> => {
    const body = (await (await mesh.fetch('/agents')).json()) as { agents: AgentRow[] };
    return body.agents.find((a) => a.agent_id === agentId);
  };

  it('a card that answers 404 leaves the agent unverified: listed with the reason, offered no task', async () => {
    let serveCard = false;
    const agentId = 'spiffe://local/worker/card-404';
    const site = await cardServer(() =>
      serveCard
        ? {
            status: 200,
            body: { name: 'card-404', url: `${site.base}/a2a`, 'x-amf': { agent_id: agentId } },
          }
        : { status: 404 },
    );
    servers.push(site);
    const rec: AgentRecord = {
      agent_id: agentId,
      endpoint: site.base,
      protocols_supported: ['A2A/1.0'],
      capability_tags: ['ghost'],
      trust_domain: 'local',
      visibility: 'local',
      heartbeat_seconds: 5,
      card_url: `${site.base}/.well-known/agent-card.json`,
    };
    advertise(rec);

    const row = await mesh.waitFor(
      async () => {
        const r = await agentsRow(agentId);
        return r?.status === 'unverified' ? r : undefined;
      },
      10_000,
      'the agent listed as unverified',
    );
    expect(row.unverified?.reason).toBe('card_fetch_failed');
    expect(row.unverified?.message).toContain('HTTP 404');
    expect(mesh.coordinator.registry.isLive(agentId)).toBe(false);

    // The warning names the agent and what it advertised.
    const warning = await mesh.waitForEvent(
      (e) =>
        e.subject === 'amf.policy.warning' &&
        (e.event.data.payload as PolicyPayload).reason === 'card_fetch_failed' &&
        (e.event.data.payload as PolicyPayload).agent_id === agentId,
      10_000,
      'the unverified warning',
    );
    const warned = warning.event.data.payload as PolicyPayload;
    expect(warned.message).toContain('admitted as unverified');
    expect(warned.advertisement).toMatchObject({ door: 'nats', endpoint: site.base, agent_id: agentId });

    // Offered nothing: no task for its tag, no OpenAI model, no advertisement to the mesh.
    expect(() => mesh.coordinator.lifecycle.announce({ tag: 'ghost', task: 'for the ghost' })).toThrow(
      /no live agent serves capability "ghost"/,
    );
    const models = (await (await fetch(`${mesh.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data.map((m) => m.id)).not.toContain('amf/ghost');
    const chat = await fetch(`${mesh.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'amf/ghost', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.status).toBe(404);
    expect(
      mesh.events.filter(
        (e) =>
          e.event.type === 'amf.discovery.capability.advertise' &&
          (e.event.data.payload as { agent_id?: string }).agent_id === agentId,
      ),
    ).toEqual([]);

    // Its card now checks out; the next advertisement that is judged verifies it and it goes live.
    serveCard = true;
    advertise({ ...rec, capability_tags: ['ghost', 'ghost-two'] });
    await mesh.waitFor(() => mesh.coordinator.registry.isLive(agentId), 10_000, 'the agent verified');
    expect((await agentsRow(agentId))?.unverified).toBeUndefined();
    await mesh.waitForEvent(
      (e) =>
        e.event.type === 'amf.discovery.capability.advertise' &&
        (e.event.data.payload as { agent_id?: string }).agent_id === agentId,
      10_000,
      'the advertisement once verified',
    );
    expect(mesh.coordinator.registry.servesTag('ghost')).toBe(true);
  });

  it('a card that names another agent leaves the agent unverified (card_mismatch)', async () => {
    const agentId = 'spiffe://local/worker/impostor';
    const site = await cardServer(() => ({
      status: 200,
      body: { name: 'victim', 'x-amf': { agent_id: 'spiffe://local/worker/victim' } },
    }));
    servers.push(site);
    advertise({
      agent_id: agentId,
      endpoint: site.base,
      protocols_supported: ['A2A/1.0'],
      capability_tags: ['impostor'],
      trust_domain: 'local',
      visibility: 'local',
      heartbeat_seconds: 5,
      card_url: `${site.base}/.well-known/agent-card.json`,
    });
    const row = await mesh.waitFor(
      async () => {
        const r = await agentsRow(agentId);
        return r?.status === 'unverified' ? r : undefined;
      },
      10_000,
      'the impostor listed as unverified',
    );
    expect(row.unverified?.reason).toBe('card_mismatch');
    expect(row.unverified?.message).toContain('spiffe://local/worker/victim');
    expect(mesh.coordinator.registry.servesTag('impostor')).toBe(false);
  });
});
