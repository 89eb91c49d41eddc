/**
 * The mDNS socket shared by the advertiser and the browser: a thin wrapper over `multicast-dns`
 * (which owns the UDP socket, group membership and dns-packet encoding) that adds what both sides
 * need from RFC 6762 before any protocol logic runs — interface selection, the packet filters every
 * mDNS host must apply, and a handler that can never throw out of the socket's event.
 */
import type { RemoteInfo } from 'node:dgram';
import { isIPv4 } from 'node:net';
import { networkInterfaces } from 'node:os';
import makeMulticastDns from 'multicast-dns';
import { AmfError } from '../../errors.js';

/** A DNS message as multicast-dns hands it over (fields from the network are unchecked). */
export type MdnsPacket = makeMulticastDns.Packet;
/** A resource record as multicast-dns encodes and decodes it. */
export type MdnsRecord = makeMulticastDns.ResourceRecord;
/** A question as multicast-dns encodes and decodes it. */
export type MdnsQuestion = makeMulticastDns.Question;

/** The mDNS port (RFC 6762 section 5); responses from any other port are ignored (section 6). */
export const MDNS_PORT = 5353;
/** The DNS-SD service type of AMF agents; the domain is always `local`. */
export const AMF_SERVICE_TYPE = '_amf-agent._tcp';
/** The service type enumeration name (RFC 6763 section 9). */
export const SERVICES_ENUMERATION = '_services._dns-sd._udp.local';

/** How a packet reached us; `legacy` is a one-shot query from a port other than 5353 (RFC 6762 6.7). */
export interface PacketOrigin {
  address: string;
  port: number;
  legacy: boolean;
}

/** One socket joined to 224.0.0.251:5353, with RFC 6762 receive filters applied. */
export interface MdnsSocket {
  /** Multicasts a packet, or unicasts it to `to` (legacy unicast answers only). */
  send(packet: MdnsPacket, to?: { address: string; port: number }): Promise<void>;
  /** Sets the one packet handler; anything it throws goes to `onError`, never to the socket. */
  onPacket(handler: (packet: MdnsPacket, origin: PacketOrigin) => void): void;
  /** Leaves the group and closes the socket; safe to call twice. */
  close(): Promise<void>;
}

/** Options of openMdnsSocket. */
export interface MdnsSocketOptions {
  /** IPv4 address of the interface to use; all interfaces when absent. */
  interfaceAddress?: string;
  /** Told about handler errors (bugs on our side, not malformed packets, which are dropped silently). */
  onError?: (err: unknown) => void;
}

/**
 * Opens the mDNS socket. With `interfaceAddress`, multicast is joined and sent on that interface only
 * and packets from senders outside its subnet are dropped: Linux delivers a group's packets to every
 * socket bound to the port whatever interface they came in on, so the subnet check is what keeps an
 * interface-bound agent from answering another network.
 */
export async function openMdnsSocket(options: MdnsSocketOptions = {}): Promise<MdnsSocket> {
  const subnet = options.interfaceAddress === undefined ? null : interfaceSubnet(options.interfaceAddress);
  const onError =
    options.onError ?? ((err: unknown) => process.emitWarning(describeError(err), 'AmfMdnsWarning'));
  const mdns = makeMulticastDns({
    port: MDNS_PORT,
    reuseAddr: true,
    loopback: true,
    ...(options.interfaceAddress === undefined
      ? {}
      : // Binding to the interface's own address would make Linux drop multicast datagrams.
        { interface: options.interfaceAddress, bind: '0.0.0.0' }),
  });
  let handler: ((packet: MdnsPacket, origin: PacketOrigin) => void) | null = null;
  let closed = false;

  await new Promise<void>((resolve, reject) => {
    mdns.once('ready', resolve);
    mdns.once('error', (err) =>
      reject(
        new AmfError(
          'UNAVAILABLE',
          `cannot open the mDNS socket on port ${MDNS_PORT}: ${err.message}`,
          undefined,
          {
            cause: err,
          },
        ),
      ),
    );
  });
  // Socket errors after start (and decode failures, which multicast-dns reports as warnings) are
  // network noise: a listener must exist so they never become an uncaught 'error' event.
  mdns.on('error', () => undefined);
  mdns.on('warning', () => undefined);

  mdns.on('packet', (packet: MdnsPacket, rinfo: RemoteInfo) => {
    if (closed || handler === null) return;
    try {
      if (!acceptable(packet, rinfo, subnet)) return;
      handler(packet, { address: rinfo.address, port: rinfo.port, legacy: rinfo.port !== MDNS_PORT });
    } catch (err) {
      onError(err);
    }
  });

  return {
    send(packet, to) {
      return new Promise<void>((resolve, reject) => {
        if (closed) return resolve();
        mdns.send(packet, to ?? null, (err) => (err ? reject(err) : resolve()));
      });
    },
    onPacket(h) {
      handler = h;
    },
    close() {
      if (closed) return Promise.resolve();
      closed = true;
      return new Promise<void>((resolve) => mdns.destroy(() => resolve()));
    },
  };
}

/** RFC 6762 receive rules: 18.3 (opcode 0), 18.11 (rcode 0), 6 (responses from port 5353 only). */
function acceptable(packet: MdnsPacket, rinfo: RemoteInfo, subnet: Subnet | null): boolean {
  if (packet.opcode !== 'QUERY' || packet.rcode !== 'NOERROR') return false;
  if (packet.type === 'response' && rinfo.port !== MDNS_PORT) return false;
  if (subnet !== null && !inSubnet(rinfo.address, subnet)) return false;
  return true;
}

interface Subnet {
  network: number;
  mask: number;
}

/** The subnet of a local IPv4 address; refuses addresses this host does not have. */
function interfaceSubnet(address: string): Subnet {
  if (!isIPv4(address)) {
    throw new AmfError(
      'INVALID_REQUEST',
      `mDNS interface must be an IPv4 address of this host (got "${address}"); mDNS runs over IPv4 only`,
    );
  }
  for (const list of Object.values(networkInterfaces())) {
    for (const entry of list ?? []) {
      if (entry.family === 'IPv4' && entry.address === address) {
        const mask = ipv4ToInt(entry.netmask);
        return { network: ipv4ToInt(address) & mask, mask };
      }
    }
  }
  throw new AmfError('INVALID_REQUEST', `mDNS interface ${address} is not an address of this host`);
}

function inSubnet(address: string, subnet: Subnet): boolean {
  return isIPv4(address) && (ipv4ToInt(address) & subnet.mask) === subnet.network;
}

function ipv4ToInt(address: string): number {
  return address.split('.').reduce((acc, part) => ((acc << 8) | Number(part)) >>> 0, 0);
}

function describeError(err: unknown): string {
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}
