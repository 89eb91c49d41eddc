/**
 * The one judge of hosts: which names and addresses are loopback, private, link-local or a cloud
 * metadata endpoint, and when two hosts are the same. Every network rule of AMF (TLS exemptions,
 * same-host rules, SSRF refusals, Origin checks, callback targets, watcher findings) asks here, so
 * they cannot disagree about what "local" means.
 *
 * The rules are pure: DNS is never consulted. A name is judged as a name (`169.254.169.254.nip.io`
 * is just a name, `127.evil.example` is not loopback); an address is judged by its value, whatever
 * spelling it comes in (`0x7f.1`, `[::ffff:7f00:1]`, `2130706433` are all 127.0.0.1, because that is
 * what the URL parser and the system resolver make of them).
 */
import { isIPv6 } from 'node:net';

/** What kind of host a string names; `name` means a DNS name (not an address). */
export type HostKind =
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'metadata'
  | 'unspecified'
  | 'multicast'
  | 'reserved'
  | 'public'
  | 'name';

/** A parsed address: 4 bytes (IPv4) or 16 bytes (IPv6). */
interface Address {
  readonly v4: readonly number[] | undefined;
  readonly v6: readonly number[] | undefined;
}

// Cloud metadata endpoints by name: GCP (`metadata.google.internal`, `metadata.goog`, and the bare
// `metadata` its resolvers answer), AWS (`instance-data` on EC2 resolvers). They hand out instance
// credentials, so no URL an agent or a config supplies may reach them.
const METADATA_NAMES = new Set([
  'metadata.google.internal',
  'metadata.goog',
  'metadata',
  'instance-data',
  'instance-data.ec2.internal',
]);
// Metadata addresses outside the link-local ranges (which are refused as a whole anyway): Alibaba
// (100.100.100.200), Azure WireServer (168.63.129.16), AWS IPv6 (fd00:ec2::254), GCP IPv6
// (fd20:ce::254). AWS/GCP/Azure/OCI IPv4 (169.254.169.254) and ECS (169.254.170.2) are listed too
// so `isMetadataHost` names them even though `isLinkLocal` covers them.
const METADATA_V4 = new Set(['169.254.169.254', '169.254.170.2', '100.100.100.200', '168.63.129.16']);
const METADATA_V6 = new Set(['fd00:ec2:0:0:0:0:0:254', 'fd20:ce:0:0:0:0:0:254']);

/**
 * Host without IPv6 brackets or a trailing dot, in lower case: the form every rule compares.
 * `URL.hostname` keeps brackets around IPv6 and keeps a trailing dot; configs write either.
 */
export function bareHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  else if (h.endsWith('.')) h = h.slice(0, -1);
  return h;
}

/**
 * One IPv4 part as the URL parser reads it: decimal, `0x` hex or leading-zero octal. Undefined
 * when the part is not a number at all (then the host is a name).
 */
function ipv4Number(part: string): number | undefined {
  if (part === '') return undefined;
  if (/^0x[0-9a-f]*$/.test(part)) return part.length === 2 ? 0 : parseInt(part.slice(2), 16);
  if (/^0[0-7]+$/.test(part)) return parseInt(part.slice(1), 8);
  if (/^(0|[1-9][0-9]*)$/.test(part)) return Number(part);
  return undefined;
}

/**
 * Parses IPv4 the way the WHATWG URL parser (and inet_aton behind the system resolver) does: one to
 * four parts, the last filling the remaining bytes, each part decimal, hex or octal. So `0x7f.1`,
 * `127.1` and `2130706433` are 127.0.0.1. A host whose last part is not a number is a name.
 */
function parseIPv4(host: string): number[] | undefined {
  const parts = host.split('.');
  if (parts.length > 4) return undefined;
  const nums: number[] = [];
  for (const p of parts) {
    const n = ipv4Number(p);
    if (n === undefined || !Number.isSafeInteger(n)) return undefined;
    nums.push(n);
  }
  const last = nums.pop()!;
  if (nums.some((n) => n > 255)) return undefined;
  if (last >= 256 ** (4 - nums.length)) return undefined;
  const bytes = [...nums];
  for (let i = 4 - nums.length - 1; i >= 0; i--) bytes.push(Math.floor(last / 256 ** i) % 256);
  return bytes;
}

/** Parses an IPv6 address (already validated by `isIPv6`) into 16 bytes. */
function parseIPv6(host: string): number[] {
  let text = host;
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  let tail: number[] = [];
  // A dotted IPv4 tail (`::ffff:127.0.0.1`) is the last two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    tail = dotted[1]!.split('.').map(Number);
    text = text.slice(0, -dotted[1]!.length) + '0:0';
  }
  const [head = '', rest] = text.split('::');
  const groups = (s: string) => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const front = groups(head);
  const back = rest === undefined ? [] : groups(rest);
  const all = [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
  const bytes = all.flatMap((g) => [g >> 8, g & 255]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** The address a host string denotes, or undefined for a name. */
function parseAddress(host: string): Address | undefined {
  const h = bareHost(host);
  if (h.includes(':')) {
    if (!isIPv6(h)) return undefined;
    const v6 = parseIPv6(h);
    // IPv4-mapped IPv6 (::ffff:a.b.c.d) reaches the IPv4 address: judge it as that address.
    const mapped = v6.slice(0, 10).every((b) => b === 0) && v6[10] === 255 && v6[11] === 255;
    return mapped ? { v4: v6.slice(12), v6: undefined } : { v4: undefined, v6 };
  }
  const v4 = parseIPv4(h);
  return v4 ? { v4, v6: undefined } : undefined;
}

/**
 * The canonical spelling of a host: dotted-quad IPv4 (IPv4-mapped IPv6 folded into it), full
 * lower-case IPv6 groups without brackets, or the bare lower-case name.
 */
export function canonicalHost(host: string): string {
  const addr = parseAddress(host);
  if (addr?.v4) return addr.v4.join('.');
  if (addr?.v6) {
    const groups: string[] = [];
    for (let i = 0; i < 16; i += 2) groups.push(((addr.v6[i]! << 8) | addr.v6[i + 1]!).toString(16));
    return groups.join(':');
  }
  return bareHost(host);
}

/** True when `host` is an IP address (any spelling) rather than a name. */
export function isIpAddress(host: string): boolean {
  return parseAddress(host) !== undefined;
}

/** The range an IPv4 address is in, metadata endpoints not singled out. */
function rangeV4([a = 0, b = 0]: readonly number[]): HostKind {
  if (a === 127) return 'loopback';
  if (a === 169 && b === 254) return 'link-local';
  if (a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168)) return 'private';
  if (a === 100 && b >= 64 && b <= 127) return 'private'; // CGNAT, used by overlay VPNs (Tailscale)
  if (a === 0) return 'unspecified'; // "this network"; 0.0.0.0 reaches the local host on Linux
  if (a >= 224 && a <= 239) return 'multicast';
  if (a >= 240) return 'reserved'; // includes the broadcast address
  return 'public';
}

/** The range an IPv6 address is in, metadata endpoints not singled out. */
function rangeV6(bytes: readonly number[]): HostKind {
  const zeroPrefix = bytes.slice(0, 15).every((b) => b === 0);
  if (zeroPrefix && bytes[15] === 1) return 'loopback';
  if (zeroPrefix && bytes[15] === 0) return 'unspecified';
  const [b0 = 0, b1 = 0] = bytes;
  if (b0 === 0xfe && (b1 & 0xc0) === 0x80) return 'link-local'; // fe80::/10
  if ((b0 & 0xfe) === 0xfc) return 'private'; // ULA fc00::/7
  if (b0 === 0xff) return 'multicast';
  return 'public';
}

/** The range kind of an address (metadata endpoints not singled out), or `name`. */
function rangeKind(host: string): HostKind {
  const addr = parseAddress(host);
  if (addr?.v4) return rangeV4(addr.v4);
  if (addr?.v6) return rangeV6(addr.v6);
  return 'name';
}

/** What kind of host `host` is (see `HostKind`); names other than loopback/metadata are `name`. */
export function hostKind(host: string): HostKind {
  const canonical = canonicalHost(host);
  if (METADATA_V4.has(canonical) || METADATA_V6.has(canonical)) return 'metadata';
  const range = rangeKind(host);
  if (range !== 'name') return range;
  const h = bareHost(host);
  // RFC 6761: `localhost` and every name under it resolve to loopback; `localhost.evil.example` does not.
  if (h === 'localhost' || h.endsWith('.localhost')) return 'loopback';
  if (METADATA_NAMES.has(h)) return 'metadata';
  return 'name';
}

/** True for loopback hosts: 127/8, ::1, IPv4-mapped loopback, `localhost` and `*.localhost`. */
export function isLoopbackHost(host: string): boolean {
  return hostKind(host) === 'loopback';
}

/** True for private addresses: RFC 1918, IPv6 ULA (fc00::/7) and CGNAT (100.64/10). */
export function isPrivateHost(host: string): boolean {
  // By range: fd00:ec2::254 and 100.100.100.200 are metadata endpoints inside private ranges.
  return rangeKind(host) === 'private';
}

/** True for link-local addresses: 169.254/16 and fe80::/10 (where most metadata endpoints live). */
export function isLinkLocal(host: string): boolean {
  return rangeKind(host) === 'link-local';
}

/** True for a cloud metadata endpoint (by name or address), e.g. 169.254.169.254, fd00:ec2::254. */
export function isMetadataHost(host: string): boolean {
  return hostKind(host) === 'metadata';
}

/**
 * True for hosts no outgoing request of AMF may reach, whoever supplied the URL: cloud metadata
 * endpoints and the link-local ranges they live in.
 */
export function isNeverFetchedHost(host: string): boolean {
  return isMetadataHost(host) || isLinkLocal(host);
}

/**
 * True when `host` can only be on the local network: loopback, private, link-local, unspecified, a
 * single-label name, or a name under a local-only suffix (.local for mDNS, .lan, .home.arpa,
 * .internal ...). Anything else may be on the internet. Names are not resolved, so this is a
 * heuristic for warnings, never a security boundary.
 */
export function isLocalNetworkHost(host: string): boolean {
  if (isLoopbackHost(host)) return true;
  const range = rangeKind(host);
  if (range === 'private' || range === 'link-local' || range === 'unspecified') return true;
  if (range !== 'name') return false;
  const h = bareHost(host);
  if (!h.includes('.')) return h.length > 0;
  return /\.(local|lan|home|home\.arpa|internal|localdomain|intranet|private)$/.test(h);
}

/**
 * Two hosts are the same when they are equal after canonicalisation (case, brackets, trailing dot,
 * address spelling), or when both are loopback (`localhost`, 127.0.0.1 and ::1 are one machine).
 */
export function sameHost(a: string, b: string): boolean {
  return canonicalHost(a) === canonicalHost(b) || (isLoopbackHost(a) && isLoopbackHost(b));
}
