/**
 * Types for the parts of `multicast-dns` (7.x) that discovery uses. The package ships no types; this
 * declaration replaces `@types/multicast-dns` so the project carries one dependency for mDNS.
 * Incoming record data is typed `unknown` on purpose: packets come from the network and every
 * field is checked where it is read (socket.ts, browser.ts, advertiser.ts).
 */
declare module 'multicast-dns' {
  import type { EventEmitter } from 'node:events';
  import type { RemoteInfo } from 'node:dgram';

  namespace multicastDns {
    /** Options of the multicast-dns factory (only the ones AMF sets). */
    interface Options {
      port?: number;
      type?: 'udp4';
      ip?: string;
      /** IPv4 address of the interface to join the group on and send from. */
      interface?: string;
      /** Address to bind; defaults to `interface` (which on Linux would filter out multicast). */
      bind?: string | false;
      multicast?: boolean;
      ttl?: number;
      loopback?: boolean;
      reuseAddr?: boolean;
    }

    /** A question as dns-packet encodes and decodes it. */
    interface Question {
      name: string;
      type: string;
      class?: string;
    }

    /** A resource record as dns-packet encodes and decodes it. */
    interface ResourceRecord {
      name: string;
      type: string;
      class?: string;
      ttl?: number;
      flush?: boolean;
      data?: unknown;
    }

    /** A DNS message as dns-packet encodes and decodes it. */
    interface Packet {
      id?: number;
      type?: 'query' | 'response';
      flags?: number;
      opcode?: string;
      rcode?: string;
      questions?: Question[];
      answers?: ResourceRecord[];
      authorities?: ResourceRecord[];
      additionals?: ResourceRecord[];
    }

    /** Where a packet goes to or came from. */
    interface Destination {
      address: string;
      port: number;
    }

    /** The mDNS socket: an EventEmitter of 'ready', 'packet', 'query', 'response', 'warning', 'error'. */
    interface MulticastDns extends EventEmitter {
      send(packet: Packet, rinfo: Destination | null, cb: (err: Error | null) => void): void;
      destroy(cb?: () => void): void;
      on(event: 'packet', listener: (packet: Packet, rinfo: RemoteInfo) => void): this;
      on(event: 'ready', listener: () => void): this;
      on(event: 'warning' | 'error', listener: (err: Error) => void): this;
      once(event: 'ready', listener: () => void): this;
      once(event: 'error', listener: (err: Error) => void): this;
    }
  }

  function multicastDns(options?: multicastDns.Options): multicastDns.MulticastDns;
  export = multicastDns;
}
