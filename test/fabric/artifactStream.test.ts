// Artifacts and evidence have their own stream (issue 29, M4): AMF_ARTIFACTS with its own limits,
// outside the event history, also on a data dir whose AMF_EVENTS was made when it still took them;
// follow-ups are kept in the history from the holder's own subject. Real nats-server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DiscardPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
} from '@nats-io/jetstream';
import {
  ARTIFACTS_STREAM,
  ensureFabricStores,
  EVENTS_STREAM,
  PUBLIC_STREAM_SUBJECTS,
} from '../../src/fabric/jetstream.js';
import { agentInputSubject } from '../../src/fabric/agentUsers.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import type { NatsConnection } from '../../src/fabric/connect.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';

let nats: TestNats;
let nc: NatsConnection;
let jsm: JetStreamManager;

beforeAll(async () => {
  nats = await startTestNats();
  nc = await nats.connect('coordinator');
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  await nats?.close();
});

/** How many messages `stream` holds on `subject`. */
async function storedOn(stream: string, subject: string): Promise<number> {
  const info = await jsm.streams.info(stream, { subjects_filter: subject });
  return info.state.subjects?.[subject] ?? 0;
}

describe('AMF_ARTIFACTS', () => {
  it('takes artifact subjects over from an AMF_EVENTS made before it existed', async () => {
    // The history as it was made before: artifacts and evidence among its subjects.
    await jsm.streams.add({
      name: EVENTS_STREAM,
      subjects: [
        'amf.discovery.capability.>',
        'amf.task.>',
        'amf.result.>',
        'amf.policy.>',
        'amf.artifact.>',
        'amf.evidence.>',
      ],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
    });
    await ensureFabricStores(nc, undefined, 3600, 1, {
      maxAgeSeconds: 3600,
      maxMessages: 500,
      maxBytes: 8 * 1024 * 1024,
      maxMessageBytes: 4096,
    });
    const events = await jsm.streams.info(EVENTS_STREAM);
    expect(events.config.subjects).toEqual(PUBLIC_STREAM_SUBJECTS);
    const artifacts = await jsm.streams.info(ARTIFACTS_STREAM);
    expect(artifacts.config.subjects).toEqual(['amf.artifact.>', 'amf.evidence.>']);
    expect(artifacts.config).toMatchObject({
      max_msgs: 500,
      max_bytes: 8 * 1024 * 1024,
      max_msg_size: 4096,
      max_age: 3600 * 1_000_000_000,
      discard: DiscardPolicy.Old,
    });
  });

  it('stores artifacts and evidence apart from the history, and no larger than its cap', async () => {
    const before = (await jsm.streams.info(EVENTS_STREAM)).state.messages;
    const js = jetstream(nc);
    await js.publish('amf.artifact.publish', JSON.stringify({ n: 1 }));
    await js.publish('amf.evidence.publish', JSON.stringify({ n: 2 }));
    await expect(js.publish('amf.artifact.publish', 'x'.repeat(5000))).rejects.toThrow(/message size/i);
    expect(await storedOn(ARTIFACTS_STREAM, 'amf.artifact.publish')).toBe(1);
    expect(await storedOn(ARTIFACTS_STREAM, 'amf.evidence.publish')).toBe(1);
    expect((await jsm.streams.info(EVENTS_STREAM)).state.messages).toBe(before);
  });

  it('keeps a follow-up from the holder’s own subject in the history', async () => {
    const subject = agentInputSubject(createEphemeralAgentKey().publicKey);
    const js = jetstream(nc);
    const ack = await js.publish(subject, JSON.stringify({ text: 'kept' }));
    expect(ack.stream).toBe(EVENTS_STREAM);
  });
});
