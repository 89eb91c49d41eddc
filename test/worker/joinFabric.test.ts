// Joining the fabric keeps the agent live while it waits: its heartbeats go out on their own clock,
// so a dial that hangs (a loaded machine, a server that accepts and says nothing) cannot make it miss
// heartbeats, go offline and lose the very grant it waits for.
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { createEvent, type EventSender } from '../../src/events/cloudEvent.js';
import type { NatsConnection } from '../../src/fabric/connect.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { joinFabric } from '../../src/worker/joinFabric.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

const SENDER: EventSender = {
  identity: 'spiffe://local/worker/joiner',
  source: 'http://127.0.0.1:1/joiner',
  role: 'specialist',
  trustDomain: 'local',
};

const RECORD: AgentRecord = {
  agent_id: SENDER.identity,
  endpoint: 'http://127.0.0.1:1',
  protocols_supported: ['A2A/1.0'],
  capability_tags: ['join'],
  trust_domain: 'local',
  visibility: 'local',
  heartbeat_seconds: 1,
};

describe('joinFabric', () => {
  let nats: TestNats;
  let joinNc: NatsConnection;
  let silent: Server;
  let silentUrl: string;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    nats = await startTestNats();
    joinNc = await nats.connect('coordinator', 'joiner');
    // A TCP server that accepts and never speaks: every NATS dial to it hangs until its time-out.
    silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentUrl = `nats://127.0.0.1:${(silent.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent?.close(resolve));
    await nats?.close();
  });

  it('keeps sending heartbeats while a dial hangs, and gives up at its deadline', async () => {
    const watcher = await nats.connect('coordinator', 'watcher');
    let heartbeats = 0;
    const sub = watcher.subscribe('amf.discovery.agent.heartbeat', {
      callback: () => {
        heartbeats++;
      },
    });
    await watcher.flush();
    const started = Date.now();
    const joining = joinFabric({
      natsUrl: silentUrl,
      joinConnection: joinNc,
      key: createEphemeralAgentKey(),
      name: 'joiner',
      heartbeat: () =>
        createEvent({ type: 'amf.discovery.agent.heartbeat', sender: SENDER, payload: RECORD }),
      timeoutMs: 4_000,
    });
    await expect(joining).rejects.toThrow(/not admitted within 4 s/);
    sub.unsubscribe();
    // The dial hung for the whole wait; heartbeats still went out about once a second.
    const seconds = (Date.now() - started) / 1000;
    expect(sockets.length).toBeGreaterThan(0);
    expect(heartbeats).toBeGreaterThanOrEqual(Math.floor(seconds) - 1);
    expect(heartbeats).toBeGreaterThanOrEqual(3);
  });
});
