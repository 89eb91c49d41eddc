/**
 * The records one advertised service instance is made of (RFC 6763): PTR from the service type to
 * the instance, the service type enumeration PTR, SRV and TXT of the instance, and A/AAAA of its
 * host, with the TTLs RFC 6762 section 10 asks for.
 */
import { isIPv4 } from 'node:net';
import { serviceDomain } from './names.js';
import { SERVICES_ENUMERATION, type MdnsPacket, type MdnsRecord } from './socket.js';

// RFC 6762 section 10: records naming a host live 120 s, the others 75 minutes.
const HOST_TTL = 120;
const OTHER_TTL = 4500;
const AUTHORITATIVE_ANSWER = 1 << 10;

/** What does not change while advertising. */
export interface ServiceConfig {
  port: number;
  host: string;
  addresses: string[];
  serviceType: string;
}

/** The records of one instance; `name` changes on a conflict, `txt` on an update. */
export class ServiceRecords {
  constructor(
    private readonly config: ServiceConfig,
    public name: string,
    public txt: Buffer[],
  ) {}

  /** The instance's full name, `<name>.<service type>.local`. */
  get fqdn(): string {
    return `${this.name}.${serviceDomain(this.config.serviceType)}`;
  }

  /** The host name the SRV record points at. */
  get host(): string {
    return this.config.host;
  }

  /** `<service type>.local`. */
  get serviceDomain(): string {
    return serviceDomain(this.config.serviceType);
  }

  /** The proposed unique records, without cache-flush bits as probes require. */
  probe(): MdnsRecord[] {
    return [this.srv(), this.txtRecord()].map((r) => ({ ...r, flush: false }));
  }

  /** Service type → instance. */
  ptr(): MdnsRecord {
    const name = serviceDomain(this.config.serviceType);
    return { name, type: 'PTR', class: 'IN', ttl: OTHER_TTL, flush: false, data: this.fqdn };
  }

  /** Service type enumeration → service type. */
  enumeration(): MdnsRecord {
    const data = serviceDomain(this.config.serviceType);
    return { name: SERVICES_ENUMERATION, type: 'PTR', class: 'IN', ttl: OTHER_TTL, flush: false, data };
  }

  /** Instance → host and port. */
  srv(): MdnsRecord {
    const data = { priority: 0, weight: 0, port: this.config.port, target: this.config.host };
    return { name: this.fqdn, type: 'SRV', class: 'IN', ttl: HOST_TTL, flush: true, data };
  }

  /** The instance's TXT pairs. */
  txtRecord(): MdnsRecord {
    // RFC 6763 6.1: an empty TXT record is one empty string, never zero strings.
    const data = this.txt.length === 0 ? [Buffer.alloc(0)] : this.txt;
    return { name: this.fqdn, type: 'TXT', class: 'IN', ttl: OTHER_TTL, flush: true, data };
  }

  /** Host → each address. */
  hostRecords(): MdnsRecord[] {
    return this.config.addresses.map((address) => ({
      name: this.config.host,
      type: isIPv4(address) ? 'A' : 'AAAA',
      class: 'IN',
      ttl: HOST_TTL,
      flush: true,
      data: address,
    }));
  }
}

/** An authoritative response packet. */
export function response(answers: MdnsRecord[], additionals: MdnsRecord[]): MdnsPacket {
  return { type: 'response', id: 0, flags: AUTHORITATIVE_ANSWER, questions: [], answers, additionals };
}
