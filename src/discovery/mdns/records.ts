/**
 * Record data as bytes: the raw uncompressed rdata that RFC 6762 compares to tell a rival's records
 * from our own (section 8.2 tiebreaking, section 9 conflicts, section 7.1 known answers). Records come
 * from dns-packet as objects whose shape the network controls, so every reader here checks it and
 * answers null for anything it does not understand.
 */
import { isIPv4 } from 'node:net';
import type { MdnsRecord } from './socket.js';

// RFC 1035 / RFC 3596 type numbers, for the type order of RFC 6762 8.2.1.
const TYPE_CODES: Record<string, number> = { A: 1, PTR: 12, TXT: 16, AAAA: 28, SRV: 33 };

/** The strings of a TXT record's data as dns-packet decodes it, or null when it is not that shape. */
export function txtStringsOf(data: unknown): Buffer[] | null {
  if (!Array.isArray(data)) return null;
  const strings: Buffer[] = [];
  for (const item of data as unknown[]) {
    if (!Buffer.isBuffer(item)) return null;
    strings.push(item);
  }
  return strings;
}

/** SRV data as dns-packet decodes it, or null when it is not that shape. */
export function srvDataOf(
  data: unknown,
): { priority: number; weight: number; port: number; target: string } | null {
  if (typeof data !== 'object' || data === null) return null;
  const { priority, weight, port, target } = data as Record<string, unknown>;
  if (typeof priority !== 'number' || typeof weight !== 'number' || typeof port !== 'number') return null;
  if (typeof target !== 'string') return null;
  return { priority, weight, port, target };
}

/** Raw rdata of an SRV, TXT, PTR, A or AAAA record; null for other types or malformed data. */
export function rdataOf(record: MdnsRecord): Buffer | null {
  switch (record.type) {
    case 'SRV': {
      const srv = srvDataOf(record.data);
      if (srv === null) return null;
      const head = Buffer.alloc(6);
      head.writeUInt16BE(srv.priority & 0xffff, 0);
      head.writeUInt16BE(srv.weight & 0xffff, 2);
      head.writeUInt16BE(srv.port & 0xffff, 4);
      return Buffer.concat([head, nameBytes(srv.target)]);
    }
    case 'TXT': {
      const strings = txtStringsOf(record.data);
      if (strings === null) return null;
      return Buffer.concat(strings.flatMap((s) => [Buffer.from([s.length & 0xff]), s]));
    }
    case 'PTR':
      return typeof record.data === 'string' ? nameBytes(record.data) : null;
    case 'A':
      return typeof record.data === 'string' && isIPv4(record.data)
        ? Buffer.from(record.data.split('.').map(Number))
        : null;
    case 'AAAA':
      // Only compared for equality of our own records, so the text form is enough.
      return typeof record.data === 'string' ? Buffer.from(record.data.toLowerCase()) : null;
    default:
      return null;
  }
}

/** A stable text form of a record set, to recognise our own probes when loopback returns them. */
export function recordSignature(records: readonly MdnsRecord[]): string {
  return records
    .map((r) => `${r.type}:${rdataOf(r)?.toString('hex') ?? '?'}`)
    .sort()
    .join(' ');
}

/**
 * RFC 6762 8.2.1: sorts both sets by class, type and rdata, then compares them record by record;
 * the first difference decides and a longer set is later. Negative: ours is earlier and we lose.
 */
export function compareRecordSets(ours: readonly MdnsRecord[], theirs: readonly MdnsRecord[]): number {
  const a = sortRecords(ours);
  const b = sortRecords(theirs);
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const x = a[i];
    const y = b[i];
    if (x === undefined || y === undefined) break;
    const order = compareRecord(x, y);
    if (order !== 0) return order;
  }
  return a.length - b.length;
}

function sortRecords(records: readonly MdnsRecord[]): MdnsRecord[] {
  return [...records].sort(compareRecord);
}

function compareRecord(x: MdnsRecord, y: MdnsRecord): number {
  // All records here are class IN (the cache-flush bit is not part of the class compared).
  const byType = (TYPE_CODES[x.type] ?? 0xffff) - (TYPE_CODES[y.type] ?? 0xffff);
  if (byType !== 0) return byType;
  return Buffer.compare(rdataOf(x) ?? Buffer.alloc(0), rdataOf(y) ?? Buffer.alloc(0));
}

/** A domain name as uncompressed wire labels. */
function nameBytes(name: string): Buffer {
  const labels = name
    .replace(/\.$/, '')
    .split('.')
    .filter((l) => l.length > 0);
  const parts = labels.map((label) => {
    const bytes = Buffer.from(label, 'utf8').subarray(0, 63);
    return Buffer.concat([Buffer.from([bytes.length]), bytes]);
  });
  return Buffer.concat([...parts, Buffer.from([0])]);
}
