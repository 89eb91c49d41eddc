// The history streams and the task bucket are stored compressed (S2) on a nats-server that can
// (2.10+), and exactly as before on one that cannot (Debian's 2.9 refuses a config naming it). The
// short-lived work and results streams stay uncompressed. A store made uncompressed by an older AMF
// is switched over in place.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import {
  AUDIT_STREAM,
  compressesStores,
  ensureFabricStores,
  EVENTS_STREAM,
  RESULTS_STREAM,
  TASKS_BUCKET,
  WORK_STREAM,
} from '../../src/fabric/jetstream.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';
import { clusterNatsBinary } from '../helpers/natsCluster.js';

describe('compressesStores', () => {
  it('is true from nats-server 2.10 on and false before or when the version is unknown', () => {
    const on = (version?: string) => compressesStores({ info: version ? { version } : undefined } as never);
    expect(on('2.10.0')).toBe(true);
    expect(on('2.12.15')).toBe(true);
    expect(on('3.0.0')).toBe(true);
    expect(on('2.9.10')).toBe(false);
    expect(on(undefined)).toBe(false);
  });
});

async function compressionOf(nats: TestNats): Promise<Record<string, string | undefined>> {
  const jsm = await jetstreamManager(await nats.connect('coordinator', 'test-inspect'));
  const of = async (stream: string) => (await jsm.streams.info(stream)).config.compression;
  return {
    events: await of(EVENTS_STREAM),
    audit: await of(AUDIT_STREAM),
    tasks: await of(`KV_${TASKS_BUCKET}`),
    work: await of(WORK_STREAM),
    results: await of(RESULTS_STREAM),
  };
}

describe('the stores on a nats-server 2.10+', () => {
  let nats: TestNats;
  beforeAll(async () => {
    nats = await startTestNats({ binary: await clusterNatsBinary() });
  });
  afterAll(async () => {
    await nats?.close();
  });

  it('keeps the history and the task states compressed, the work and results streams not', async () => {
    await ensureFabricStores(await nats.connect('coordinator'));
    expect(await compressionOf(nats)).toEqual({
      events: 's2',
      audit: 's2',
      tasks: 's2',
      work: 'none',
      results: 'none',
    });
  });

  it('switches an existing uncompressed history over in place, keeping what it holds', async () => {
    const nc = await nats.connect('coordinator', 'test-old');
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(EVENTS_STREAM);
    await jsm.streams.update(EVENTS_STREAM, { ...info.config, compression: 'none' as never });
    nc.publish('amf.task.progress', JSON.stringify({ kept: true }));
    await nc.flush();
    const before = (await jsm.streams.info(EVENTS_STREAM)).state.messages;
    expect((await jsm.streams.info(EVENTS_STREAM)).config.compression).toBe('none');
    await ensureFabricStores(nc);
    const after = await jsm.streams.info(EVENTS_STREAM);
    expect(after.config.compression).toBe('s2');
    expect(after.state.messages).toBe(before);
  });
});

describe('the stores on Debian nats-server 2.9', () => {
  let nats: TestNats;
  beforeAll(async () => {
    nats = await startTestNats();
  });
  afterAll(async () => {
    await nats?.close();
  });

  it('are made without compression, which that server does not know', async () => {
    const nc = await nats.connect('coordinator');
    // The suite's default nats-server is the one on PATH; this case is about one older than 2.10.
    expect(compressesStores(nc)).toBe(false);
    await ensureFabricStores(nc);
    const c = await compressionOf(nats);
    for (const value of Object.values(c)) expect(value ?? 'none').toBe('none');
  });
});
