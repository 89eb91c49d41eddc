/**
 * Which of our records answer a query (RFC 6762 section 6): by question name and type, minus the
 * known answers the querier already holds with at least half their TTL left (section 7.1), plus
 * the records it will ask for next (RFC 6763 section 12).
 */
import { canonicalName, isInternetClass } from './names.js';
import { SERVICES_ENUMERATION, type MdnsPacket, type MdnsRecord } from './socket.js';
import { rdataOf } from './records.js';
import type { ServiceRecords } from './serviceRecords.js';

/** Questions read from one packet at most. */
export const MAX_QUESTIONS = 64;

/** Our answers and additional records for `packet`, each keyed by {@link recordKey}. */
export function selectAnswers(
  packet: MdnsPacket,
  records: ServiceRecords,
): { answers: Map<string, MdnsRecord>; extra: Map<string, MdnsRecord> } {
  const svc = canonicalName(records.serviceDomain);
  const fqdn = canonicalName(records.fqdn);
  const host = canonicalName(records.host);
  const answers = new Map<string, MdnsRecord>();
  const add = (r: MdnsRecord) => answers.set(recordKey(r), r);
  for (const q of (packet.questions ?? []).slice(0, MAX_QUESTIONS)) {
    if (typeof q?.name !== 'string' || typeof q.type !== 'string' || !isInternetClass(q.class)) continue;
    const name = canonicalName(q.name);
    const wants = (type: string) => q.type === type || q.type === 'ANY';
    if (name === svc && wants('PTR')) add(records.ptr());
    if (name === SERVICES_ENUMERATION && wants('PTR')) add(records.enumeration());
    if (name === fqdn && wants('SRV')) add(records.srv());
    if (name === fqdn && wants('TXT')) add(records.txtRecord());
    if (name === host)
      records
        .hostRecords()
        .filter((r) => wants(r.type))
        .forEach(add);
  }
  // RFC 6762 7.1: leave out what the querier already knows with at least half its TTL left.
  for (const known of packet.answers ?? []) {
    const key = typeof known?.name === 'string' ? recordKey(known) : '';
    const mine = answers.get(key);
    const knownData = mine === undefined ? null : rdataOf(known);
    const mineData = mine === undefined ? null : rdataOf(mine);
    if (
      mine &&
      knownData &&
      mineData &&
      knownData.equals(mineData) &&
      (known.ttl ?? 0) >= (mine.ttl ?? 0) / 2
    ) {
      answers.delete(key);
    }
  }
  const extra = new Map<string, MdnsRecord>();
  if (answers.size === 0) return { answers, extra };
  // RFC 6763 12: send what the querier will ask for next along with the answer.
  const types = new Set([...answers.values()].map((r) => r.type));
  if (types.has('PTR') && answers.has(recordKey(records.ptr()))) {
    for (const r of [records.srv(), records.txtRecord(), ...records.hostRecords()])
      extra.set(recordKey(r), r);
  }
  if (types.has('SRV')) for (const r of records.hostRecords()) extra.set(recordKey(r), r);
  for (const key of answers.keys()) extra.delete(key);
  return { answers, extra };
}

/** One key per record: PTR, A and AAAA by name, type and target; SRV and TXT by name and type. */
export function recordKey(record: MdnsRecord): string {
  const data = typeof record.data === 'string' ? canonicalName(record.data) : '';
  // PTR records of one name differ by target; the unique records are one per name and type.
  return `${canonicalName(record.name)}|${record.type}|${record.type === 'PTR' || record.type === 'A' || record.type === 'AAAA' ? data : ''}`;
}
