import { describe, expect, it } from 'vitest';
import {
  bareHost,
  canonicalHost,
  hostKind,
  isIpAddress,
  isLinkLocal,
  isLocalNetworkHost,
  isLoopbackHost,
  isMetadataHost,
  isNeverFetchedHost,
  isPrivateHost,
  sameHost,
} from '../../src/net/hostRules.js';

/** The hostname the WHATWG URL parser (and so fetch) makes of `host`. */
const viaUrl = (host: string) => new URL(`http://${host}/`).hostname;

describe('hostRules: loopback', () => {
  const loopback = [
    '127.0.0.1',
    '127.0.0.2',
    '127.255.255.254',
    '127.1',
    '0x7f.1',
    '0x7f000001',
    '2130706433',
    '0177.0.0.1',
    'localhost',
    'LOCALHOST',
    'localhost.',
    'app.localhost',
    'a.b.localhost',
    '::1',
    '[::1]',
    '0:0:0:0:0:0:0:1',
    '::ffff:127.0.0.1',
    '[::ffff:127.0.0.1]',
    '::ffff:7f00:1',
    '[::FFFF:7F00:0001]',
  ];
  it.each(loopback)('%s is loopback', (host) => {
    expect(isLoopbackHost(host)).toBe(true);
    expect(hostKind(host)).toBe('loopback');
  });
  it.each(loopback.filter((h) => !h.startsWith(':') && !h.startsWith('0:')))(
    '%s is loopback after the URL parser too',
    (host) => expect(isLoopbackHost(viaUrl(host))).toBe(true),
  );

  const notLoopback = [
    '127.evil.example',
    '127.0.0.1.evil.example',
    '127.0.0.1.lookalike.invalid',
    'localhost.evil.example',
    'evil-localhost',
    'mylocalhost',
    'localhost.localdomain.evil',
    '128.0.0.1',
    '126.255.255.255',
    '::2',
    '::',
    '::127.0.0.1', // IPv4-compatible, not mapped: not routed to loopback
    '::ffff:128.0.0.1',
    '0.0.0.0',
    '',
    'example.com',
  ];
  it.each(notLoopback)('%s is not loopback', (host) => expect(isLoopbackHost(host)).toBe(false));
});

describe('hostRules: private, link-local, metadata', () => {
  it.each([
    '10.0.0.1',
    '10.255.255.255',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '100.64.0.1',
    '100.127.255.255',
    'fc00::1',
    'fd12:3456::1',
    '[fd00::1]',
    '::ffff:10.1.2.3',
    '::ffff:c0a8:101',
  ])('%s is private', (host) => expect(isPrivateHost(host)).toBe(true));

  it.each([
    '172.15.0.1',
    '172.32.0.1',
    '192.169.0.1',
    '100.63.255.255',
    '100.128.0.1',
    '11.0.0.1',
    '127.0.0.1',
    'localhost',
    '169.254.1.1',
    'fe80::1',
    'fbff::1',
    'fe00::1',
    '8.8.8.8',
    '10.evil.example',
    '192.168.example',
    'example.com',
  ])('%s is not private', (host) => expect(isPrivateHost(host)).toBe(false));

  it.each([
    '169.254.0.1',
    '169.254.169.254',
    '0xa9fea9fe',
    'fe80::1',
    '[fe80::1%25eth0]',
    'febf::1',
    '::ffff:169.254.1.1',
  ])('%s is link-local', (host) => expect(isLinkLocal(host)).toBe(true));
  it.each(['169.253.0.1', '169.255.0.1', 'fec0::1', 'fe7f::1', '169.254.1.1.lookalike.invalid'])(
    '%s is not link-local',
    (host) => expect(isLinkLocal(host)).toBe(false),
  );

  const metadata = [
    '169.254.169.254',
    '[::ffff:169.254.169.254]',
    '::ffff:a9fe:a9fe',
    '0xa9.0xfe.0xa9.0xfe',
    '2852039166',
    '169.254.43518',
    '0251.0376.0251.0376',
    '169.254.170.2',
    '100.100.100.200',
    '168.63.129.16',
    'fd00:ec2::254',
    '[FD00:EC2:0:0:0:0:0:254]',
    'fd20:ce::254',
    'metadata.google.internal',
    'METADATA.GOOGLE.INTERNAL.',
    'metadata',
    'metadata.goog',
    'instance-data',
  ];
  it.each(metadata)('%s is a metadata host', (host) => {
    expect(isMetadataHost(host)).toBe(true);
    expect(isNeverFetchedHost(host)).toBe(true);
  });
  it.each(metadata.filter((h) => !h.startsWith(':') && !h.startsWith('fd')))(
    '%s is a metadata host after the URL parser too',
    (host) => expect(isMetadataHost(viaUrl(host))).toBe(true),
  );
  it.each([
    '169.254.169.254.lookalike.invalid',
    'metadata.google.internal.evil.example',
    'evil-metadata',
    'metadata.example',
    '169.254.169.253',
    '100.100.100.201',
    'fd00:ec2::253',
    '127.0.0.1',
    'localhost',
  ])('%s is not a metadata host', (host) => expect(isMetadataHost(host)).toBe(false));

  it('a name that spells an address is just a name', () => {
    for (const host of [
      '169.254.169.254.lookalike.invalid',
      '127.0.0.1.lookalike2.invalid',
      '10.0.0.1.example',
    ])
      expect(hostKind(host), host).toBe('name');
    expect(isNeverFetchedHost('169.254.169.254.lookalike.invalid')).toBe(false);
  });

  it('link-local addresses are never fetched even when not a known metadata endpoint', () => {
    expect(isNeverFetchedHost('169.254.10.10')).toBe(true);
    expect(isNeverFetchedHost('fe80::abcd')).toBe(true);
    expect(isNeverFetchedHost('10.0.0.1')).toBe(false);
    expect(isNeverFetchedHost('127.0.0.1')).toBe(false);
  });

  it('classifies unspecified, multicast, reserved and public addresses', () => {
    expect(hostKind('0.0.0.0')).toBe('unspecified');
    expect(hostKind('0.1.2.3')).toBe('unspecified');
    expect(hostKind('::')).toBe('unspecified');
    expect(hostKind('224.0.0.251')).toBe('multicast');
    expect(hostKind('ff02::fb')).toBe('multicast');
    expect(hostKind('255.255.255.255')).toBe('reserved');
    expect(hostKind('240.0.0.1')).toBe('reserved');
    expect(hostKind('93.184.216.34')).toBe('public');
    expect(hostKind('2001:db8::1')).toBe('public');
    expect(hostKind('example.com')).toBe('name');
  });
});

describe('hostRules: spellings', () => {
  it('bareHost strips brackets, one trailing dot and case', () => {
    expect(bareHost('[::1]')).toBe('::1');
    expect(bareHost('Example.COM.')).toBe('example.com');
    expect(bareHost(' localhost ')).toBe('localhost');
  });

  it('canonicalHost folds address spellings into one', () => {
    expect(canonicalHost('0x7f.1')).toBe('127.0.0.1');
    expect(canonicalHost('[::ffff:7f00:1]')).toBe('127.0.0.1');
    expect(canonicalHost('[FD00:EC2::254]')).toBe('fd00:ec2:0:0:0:0:0:254');
    expect(canonicalHost('Example.com.')).toBe('example.com');
  });

  it('agrees with the URL parser on IPv4 spellings', () => {
    for (const host of ['0x7f.1', '127.1', '2130706433', '0177.0.0.01', '10.0x10.1', '192.168.257'])
      expect(canonicalHost(host), host).toBe(viaUrl(host));
  });

  it('out-of-range or mixed parts are names, not addresses', () => {
    for (const host of ['256.0.0.1', '1.2.3.4.5', '127.0.0.1x', '0x7g.1', '1.2.3.256', '08.0.0.1'])
      expect(isIpAddress(host), host).toBe(false);
  });
});

describe('hostRules: sameHost', () => {
  it.each([
    ['example.com', 'EXAMPLE.com.'],
    ['localhost', '127.0.0.1'],
    ['127.0.0.1', '[::1]'],
    ['::1', 'app.localhost'],
    ['[::ffff:7f00:1]', '127.0.0.2'],
    ['10.0.0.1', '::ffff:10.0.0.1'],
    ['[FD00::1]', 'fd00:0:0:0:0:0:0:1'],
  ])('%s and %s are the same host', (a, b) => expect(sameHost(a, b)).toBe(true));
  it.each([
    ['example.com', 'example.org'],
    ['127.0.0.1', '127.evil.example'],
    ['localhost', 'localhost.evil.example'],
    ['10.0.0.1', '10.0.0.2'],
    ['127.0.0.1', '0.0.0.0'],
    ['169.254.169.254', '169.254.169.254.lookalike.invalid'],
  ])('%s and %s are different hosts', (a, b) => expect(sameHost(a, b)).toBe(false));
});

describe('hostRules: local network (watcher heuristic)', () => {
  it.each([
    '127.0.0.1',
    'localhost',
    '10.1.2.3',
    '169.254.1.1',
    '100.100.100.200',
    'fd00::1',
    'fe80::1',
    '0.0.0.0',
    'printer',
    'box.local',
    'nas.home.arpa',
    'svc.internal',
  ])('%s is local', (host) => expect(isLocalNetworkHost(host)).toBe(true));
  it.each(['8.8.8.8', 'example.com', '2001:db8::1', '168.63.129.16', '127.evil.example', ''])(
    '%s is not local',
    (host) => expect(isLocalNetworkHost(host)).toBe(false),
  );
});
