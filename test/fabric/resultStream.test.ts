// Stored results cannot be pushed out (issue 29): with no coordinator taking them, one agent that
// floods AMF_RESULTS on its own subject fills it, and the stream then refuses the flood, never
// evicting a result another agent stored before. Real nats-server, the streams as the coordinator
// makes them (a results stream small enough that the flood overfills it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { agentResultSubject } from '../../src/fabric/agentUsers.js';
import { ensureFabricStores, RESULTS_STREAM } from '../../src/fabric/jetstream.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import type { NatsConnection } from '../../src/fabric/connect.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

const MiB = 1024 * 1024;
const FLOOD = 12;
const BLOB_BYTES = 200_000;

let nats: TestNats;
let nc: NatsConnection;
let jsm: JetStreamManager;

beforeAll(async () => {
  nats = await startTestNats();
  nc = await nats.connect('coordinator');
  jsm = await jetstreamManager(nc);
  // The results stream takes the history's byte limit when smaller: 1 MiB here.
  await ensureFabricStores(nc, { maxAgeSeconds: 3600, maxMessages: 1000, maxBytes: MiB }, 3600, 1);
});
afterAll(async () => {
  await nats?.close();
});

describe('AMF_RESULTS', () => {
  it('refuses a flood once full and keeps the result another agent stored before', async () => {
    const js = jetstream(nc);
    const victim = createEphemeralAgentKey();
    const flooder = createEphemeralAgentKey();
    const kept = await js.publish(
      agentResultSubject(victim.publicKey, 'victim-task'),
      JSON.stringify({ victim: true }),
    );
    const blob = JSON.stringify({ blob: 'x'.repeat(BLOB_BYTES) });
    let stored = 0;
    let refused = 0;
    for (let i = 0; i < FLOOD; i++) {
      try {
        await js.publish(agentResultSubject(flooder.publicKey, `flood-${i}`), blob);
        stored++;
      } catch {
        refused++;
      }
    }
    // 12 × 200 kB do not fit in 1 MiB: the stream took what fits and refused the rest.
    expect(stored).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    const victimResult = await jsm.streams.getMessage(RESULTS_STREAM, { seq: kept.seq });
    expect(victimResult?.json()).toEqual({ victim: true });
    const { state } = await jsm.streams.info(RESULTS_STREAM);
    expect(state.first_seq).toBe(kept.seq);
    expect(state.messages).toBe(stored + 1);
  });
});
