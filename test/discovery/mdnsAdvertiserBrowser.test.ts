// Our advertiser against our browser, and each of them against hand-made packets, over real
// multicast on loopback. Runs only inside a private network namespace (see mdnsTestKit.onlyLoopback);
// other test files may share the multicast group, so everything is filtered by unique names.
import { createSocket } from 'node:dgram';
import makeMulticastDns from 'multicast-dns';
import { afterEach, describe, expect, it } from 'vitest';
import type { RawAdvertisement } from '../../src/discovery/advertisement.js';
import { startMdnsAdvertiser, type MdnsAdvertiser } from '../../src/discovery/mdns/advertiser.js';
import { startMdnsBrowser, type MdnsBrowser } from '../../src/discovery/mdns/browser.js';
import { encodeTxt } from '../../src/discovery/txtRecord.js';
import { onlyLoopback, uniqueName, waitFor } from './mdnsTestKit.js';

const SERVICE = '_amf-agent._tcp.local';
const GROUP = { address: '224.0.0.251', port: 5353 };

/** Everything a browser reported, for assertions filtered by instance name. */
class Recorder {
  readonly ads: RawAdvertisement[] = [];
  readonly goodbyes: string[] = [];
  adsFor(instance: string): RawAdvertisement[] {
    return this.ads.filter((ad) => ad.instance === instance);
  }
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function advertise(...args: Parameters<typeof startMdnsAdvertiser>): Promise<MdnsAdvertiser> {
  const advertiser = await startMdnsAdvertiser(...args);
  cleanups.push(() => advertiser.close());
  return advertiser;
}

async function browse(
  recorder: Recorder,
  options: { interfaceAddress?: string; maxInstances?: number } = {},
) {
  const browser: MdnsBrowser = await startMdnsBrowser({
    ...options,
    onAdvertisement: (ad) => recorder.ads.push(ad),
    onGoodbye: (instance) => recorder.goodbyes.push(instance),
    onError: (err) => {
      throw err;
    },
  });
  cleanups.push(() => browser.close());
  return browser;
}

/** A raw multicast-dns socket on port 5353, for hand-made responses and queries. */
async function rawPeer(port = 5353): Promise<ReturnType<typeof makeMulticastDns>> {
  const peer = makeMulticastDns({ port, multicast: port !== 0 });
  if (port !== 0) await new Promise<void>((resolve) => peer.once('ready', resolve));
  peer.on('warning', () => undefined);
  cleanups.push(() => new Promise<void>((resolve) => peer.destroy(() => resolve())));
  return peer;
}

function sendRaw(peer: ReturnType<typeof makeMulticastDns>, packet: makeMulticastDns.Packet): Promise<void> {
  return new Promise((resolve, reject) =>
    peer.send(packet, { ...GROUP }, (err) => (err ? reject(err) : resolve())),
  );
}

/** PTR, SRV and TXT of one instance as a response packet. */
function instanceResponse(instance: string, txt: Buffer[], ttl: number): makeMulticastDns.Packet {
  const fqdn = `${instance}.${SERVICE}`;
  return {
    type: 'response',
    flags: 1 << 10,
    answers: [
      { name: SERVICE, type: 'PTR', class: 'IN', ttl, data: fqdn },
      {
        name: fqdn,
        type: 'SRV',
        class: 'IN',
        ttl,
        flush: true,
        data: { priority: 0, weight: 0, port: 7000, target: 'raw-peer.local' },
      },
      { name: fqdn, type: 'TXT', class: 'IN', ttl, flush: true, data: txt },
    ],
  };
}

describe.skipIf(!onlyLoopback())('mDNS advertiser and browser (private namespace)', () => {
  it('the browser sees the advertisement with its exact TXT, then the update, then the goodbye', async () => {
    const name = uniqueName('loop');
    const txt = {
      id: `spiffe://local/worker/${name}`,
      ep: 'http://127.0.0.1:8766',
      proto: 'A2A/1.0',
      tags: 'echo,a-b',
    };
    const recorder = new Recorder();
    const advertiser = await startMdnsAdvertiser({ instanceName: name, port: 8766, txt });
    await browse(recorder);

    const first = await waitFor(() => recorder.adsFor(name)[0], 'the advertisement');
    expect(advertiser.instanceName).toBe(name);
    expect(first).toMatchObject({
      door: 'mdns',
      source: '127.0.0.1',
      instance: name,
      txt,
      invalid_utf8: false,
    });
    expect(first.txt_bytes).toBe(encodeTxt(txt).reduce((n, b) => n + 1 + b.length, 0));
    expect(first.raw_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(Number.isNaN(Date.parse(first.received_at))).toBe(false);

    advertiser.update({ ...txt, status: 'degraded' });
    const changed = await waitFor(() => recorder.adsFor(name)[1], 'the changed advertisement');
    expect(changed.txt).toEqual({ ...txt, status: 'degraded' });
    expect(changed.raw_id).not.toBe(first.raw_id);

    await advertiser.close();
    await waitFor(() => (recorder.goodbyes.includes(name) ? true : undefined), 'the goodbye');
    // Re-announcements of an unchanged TXT are not new advertisements.
    expect(recorder.adsFor(name)).toHaveLength(2);
  });

  it('works bound to one interface address', async () => {
    const name = uniqueName('iface');
    const recorder = new Recorder();
    await browse(recorder, { interfaceAddress: '127.0.0.1' });
    await advertise({ instanceName: name, port: 9001, txt: { id: 'x' }, interfaceAddress: '127.0.0.1' });
    expect((await waitFor(() => recorder.adsFor(name)[0], 'the advertisement')).txt).toEqual({ id: 'x' });
  });

  it('refuses an interface address this host does not have, and bad options', async () => {
    await expect(
      startMdnsBrowser({ interfaceAddress: '192.0.2.1', onAdvertisement: () => undefined }),
    ).rejects.toThrow(/not an address of this host/);
    await expect(
      startMdnsBrowser({ interfaceAddress: '::1', onAdvertisement: () => undefined }),
    ).rejects.toThrow(/IPv4/);
    await expect(startMdnsAdvertiser({ instanceName: 'a.b', port: 1, txt: {} })).rejects.toThrow(
      /without dots/,
    );
    await expect(startMdnsAdvertiser({ instanceName: 'ok', port: 0, txt: {} })).rejects.toThrow(/port/);
    await expect(
      startMdnsAdvertiser({ instanceName: 'ok', port: 1, txt: { k: 'v'.repeat(600) } }),
    ).rejects.toThrow(/at most 255/);
  });

  it('renames the second claimant of an instance name to "name (2)"', async () => {
    const name = uniqueName('clash');
    const recorder = new Recorder();
    await browse(recorder);
    const first = await advertise({ instanceName: name, port: 9101, txt: { id: 'first' } });
    const second = await advertise({ instanceName: name, port: 9102, txt: { id: 'second' } });
    expect(first.instanceName).toBe(name);
    expect(second.instanceName).toBe(`${name} (2)`);
    await waitFor(() => recorder.adsFor(`${name} (2)`)[0], 'the renamed advertisement');
    expect(recorder.adsFor(name).map((ad) => ad.txt.id)).toEqual(['first']);
  });

  it('answers a PTR query with SRV, TXT and A in the additional section', async () => {
    const name = uniqueName('answer');
    await advertise({ instanceName: name, port: 9201, host: 'answer-host', txt: { id: 'q' } });
    const peer = await rawPeer();
    const responses: makeMulticastDns.Packet[] = [];
    peer.on('packet', (packet: makeMulticastDns.Packet) => {
      if (packet.type === 'response') responses.push(packet);
    });
    await sendRaw(peer, { type: 'query', questions: [{ name: SERVICE, type: 'PTR', class: 'IN' }] });
    const fqdn = `${name}.${SERVICE}`;
    const reply = await waitFor(
      () => responses.find((p) => p.answers?.some((a) => a.type === 'PTR' && a.data === fqdn)),
      'the answer',
    );
    const extra = reply.additionals ?? [];
    expect(extra.find((r) => r.type === 'SRV' && r.name === fqdn)?.data).toMatchObject({
      port: 9201,
      target: 'answer-host.local',
    });
    expect(extra.find((r) => r.type === 'TXT' && r.name === fqdn)?.data).toEqual([Buffer.from('id=q')]);
    expect(extra.find((r) => r.type === 'A' && r.name === 'answer-host.local')?.data).toBe('127.0.0.1');
    expect(reply.answers?.find((a) => a.type === 'PTR')?.ttl).toBe(4500);
  });

  it('answers a legacy unicast query by unicast, with its ID, question and short TTLs', async () => {
    const name = uniqueName('legacy');
    await advertise({ instanceName: name, port: 9301, txt: { id: 'l' } });
    const fqdn = `${name}.${SERVICE}`;
    const querier = await rawPeer(0);
    const replies: makeMulticastDns.Packet[] = [];
    querier.on('packet', (packet: makeMulticastDns.Packet) => replies.push(packet));
    await sendRaw(querier, {
      type: 'query',
      id: 4242,
      questions: [{ name: fqdn, type: 'SRV', class: 'IN' }],
    });
    const reply = await waitFor(() => replies.find((p) => p.type === 'response'), 'the unicast reply');
    expect(reply.id).toBe(4242);
    expect(reply.questions?.[0]?.name).toBe(fqdn);
    const srv = reply.answers?.find((a) => a.type === 'SRV');
    expect(srv?.ttl).toBeLessThanOrEqual(10);
    expect(srv?.flush).toBe(false);
  });

  it('reports a goodbye when a cached record expires without refresh', async () => {
    const name = uniqueName('expire');
    const recorder = new Recorder();
    await browse(recorder);
    const peer = await rawPeer();
    await sendRaw(peer, instanceResponse(name, [Buffer.from('id=short-lived')], 2));
    await waitFor(() => recorder.adsFor(name)[0], 'the advertisement');
    const started = Date.now();
    await waitFor(() => (recorder.goodbyes.includes(name) ? true : undefined), 'the expiry');
    expect(Date.now() - started).toBeGreaterThan(800);
  });

  it('flags invalid UTF-8 and reports oversized TXT with its size instead of dropping it', async () => {
    const bad = uniqueName('badutf8');
    const big = uniqueName('big');
    const recorder = new Recorder();
    await browse(recorder);
    const peer = await rawPeer();
    const invalid = Buffer.concat([Buffer.from('id=x'), Buffer.from([0xc3, 0x28])]);
    await sendRaw(peer, instanceResponse(bad, [invalid], 120));
    const oversized = [
      Buffer.from(`a=${'x'.repeat(250)}`),
      Buffer.from(`b=${'y'.repeat(250)}`),
      Buffer.from('c=z'),
    ];
    await sendRaw(peer, instanceResponse(big, oversized, 120));
    const badAd = await waitFor(() => recorder.adsFor(bad)[0], 'the invalid UTF-8 advertisement');
    expect(badAd.invalid_utf8).toBe(true);
    expect(badAd.txt.id).toBe('x\uFFFD(');
    const bigAd = await waitFor(() => recorder.adsFor(big)[0], 'the oversized advertisement');
    expect(bigAd.txt_bytes).toBe(253 + 253 + 4);
    await sendRaw(peer, instanceResponse(bad, [invalid], 0));
    await waitFor(() => (recorder.goodbyes.includes(bad) ? true : undefined), 'the TTL 0 goodbye');
  });

  it('survives malformed packets and keeps working', async () => {
    const name = uniqueName('after-garbage');
    const recorder = new Recorder();
    await browse(recorder);
    const advertiser = await advertise({ instanceName: uniqueName('victim'), port: 9401, txt: { id: 'v' } });
    const raw = createSocket({ type: 'udp4', reuseAddr: true });
    cleanups.push(() => new Promise<void>((resolve) => raw.close(() => resolve())));
    const header = (qd: number, an: number) => Buffer.from([0, 0, 0x84, 0, 0, qd, 0, an, 0, 0, 0, 0]);
    const garbage = [
      Buffer.from('not a dns packet'),
      header(0, 1), // promises an answer that is not there
      Buffer.concat([header(0, 1), Buffer.from([0xc0, 0x0c])]), // pointer loop onto itself
      Buffer.concat([header(0, 1), Buffer.from([3, 0x61, 0x62])]), // truncated label
      Buffer.concat([header(1, 0), Buffer.from([0x3f]), Buffer.alloc(10)]), // label longer than the packet
    ];
    for (const datagram of garbage) {
      await new Promise<void>((resolve, reject) =>
        raw.send(datagram, GROUP.port, GROUP.address, (err) => (err ? reject(err) : resolve())),
      );
    }
    const peer = await rawPeer();
    // Well-formed DNS with shapes nobody sends: a PTR to a foreign name, records with odd classes.
    await sendRaw(peer, {
      type: 'response',
      answers: [
        { name: SERVICE, type: 'PTR', class: 'IN', ttl: 120, data: 'elsewhere.local' },
        { name: `${name}.${SERVICE}`, type: 'TXT', class: 'CH', ttl: 120, data: [Buffer.from('id=chaos')] },
      ],
    });
    await sendRaw(peer, instanceResponse(name, [Buffer.from('id=fine')], 120));
    expect((await waitFor(() => recorder.adsFor(name)[0], 'the advertisement after garbage')).txt).toEqual({
      id: 'fine',
    });
    expect(recorder.adsFor(name)).toHaveLength(1);
    advertiser.update({ id: 'still-alive' });
    await waitFor(
      () => recorder.adsFor(advertiser.instanceName).find((ad) => ad.txt.id === 'still-alive'),
      'the advertiser',
    );
  });

  it('remembers at most maxInstances, forgetting the least recently heard', async () => {
    const names = [uniqueName('cap-a'), uniqueName('cap-b'), uniqueName('cap-c')];
    const recorder = new Recorder();
    await browse(recorder, { maxInstances: 2 });
    const peer = await rawPeer();
    for (const name of names) {
      await sendRaw(peer, instanceResponse(name, [Buffer.from(`id=${name}`)], 120));
      await waitFor(() => recorder.adsFor(name)[0], name);
    }
    // The first was evicted, so its goodbye is for an instance the browser no longer knows.
    await sendRaw(peer, instanceResponse(names[0] ?? '', [Buffer.from('x')], 0));
    await sendRaw(peer, instanceResponse(names[2] ?? '', [Buffer.from('x')], 0));
    await waitFor(
      () => (recorder.goodbyes.includes(names[2] ?? '') ? true : undefined),
      'the goodbye of the newest',
    );
    expect(recorder.goodbyes).not.toContain(names[0]);
  });
});
