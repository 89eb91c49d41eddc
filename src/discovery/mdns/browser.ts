/**
 * Browses `_amf-agent._tcp.local` (RFC 6763 section 4) and turns what it hears into
 * RawAdvertisements for the admission pipeline: one for every instance whose TXT record is new or
 * changed, and a goodbye when a record arrives with TTL 0 or a cached record's TTL runs out.
 * Continuous querying follows RFC 6762 5.2 (first query after 20–120 ms, then intervals doubling up
 * to an hour, known answers listed) and so does cache maintenance (re-asking at 80/85/90/95 % of a
 * record's lifetime). Everything in a packet is untrusted: shapes are checked, the cache is capped,
 * and nothing thrown inside the socket handler escapes it.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { RawAdvertisement } from '../advertisement.js';
import { canonicalName, instanceLabel, isInternetClass, serviceDomain } from './names.js';
import {
  AMF_SERVICE_TYPE,
  openMdnsSocket,
  type MdnsPacket,
  type MdnsQuestion,
  type MdnsRecord,
  type MdnsSocket,
  type PacketOrigin,
} from './socket.js';
import { srvDataOf, txtStringsOf } from './records.js';
import { decodeTxt } from '../txtRecord.js';

/** Options of startMdnsBrowser. */
export interface MdnsBrowserOptions {
  /** IPv4 address of the one interface to browse on; all interfaces when absent. */
  interfaceAddress?: string;
  /** Called for every instance whose TXT record is new or changed. */
  onAdvertisement: (ad: RawAdvertisement) => void;
  /**
   * Called with the instance name when an instance says goodbye (a TTL-0 record: `origin` is where
   * that packet came from, which need not be where the instance was heard) or its records expire
   * (`origin` undefined).
   */
  onGoodbye?: (instance: string, origin?: PacketOrigin) => void;
  /** Service type; AMF has exactly one. */
  serviceType?: typeof AMF_SERVICE_TYPE;
  /** Most instances remembered at once (default 4096); the least recently heard is forgotten first. */
  maxInstances?: number;
  /** Told about exceptions from the callbacks and send failures; default: a process warning. */
  onError?: (err: unknown) => void;
}

/** A running browser. */
export interface MdnsBrowser {
  /** Stops querying and closes the socket (no goodbyes are reported for what was cached). */
  close(): Promise<void>;
}

const DEFAULT_MAX_INSTANCES = 4096;
const FIRST_QUERY_INTERVAL_MS = 1000;
const MAX_QUERY_INTERVAL_MS = 3_600_000;
const SWEEP_MS = 1000;
const RESOLVE_RETRY_MS = 1000;
/** An instance that never answers for its SRV or TXT is not asked forever. */
const MAX_RESOLVE_ATTEMPTS = 3;
const MAX_RECORDS_PER_PACKET = 256;
const MAX_QUESTIONS_PER_QUERY = 32;
/** Room for known answers in one query, well under a 1500-byte Ethernet MTU. */
const KNOWN_ANSWER_BUDGET = 1200;

/** Starts browsing; resolves once the socket is open (the first query follows within 120 ms). */
export async function startMdnsBrowser(options: MdnsBrowserOptions): Promise<MdnsBrowser> {
  const onError = options.onError ?? ((err: unknown) => process.emitWarning(String(err), 'AmfMdnsWarning'));
  const socket = await openMdnsSocket({
    ...(options.interfaceAddress === undefined ? {} : { interfaceAddress: options.interfaceAddress }),
    onError,
  });
  const browser = new MdnsBrowserImpl(socket, options, onError);
  browser.start();
  return browser;
}

/** A cached record's lifetime and how many maintenance queries it has had. */
interface Lifetime {
  receivedAt: number;
  ttlMs: number;
  queries: number;
  /** RFC 6762 5.2 adds 0–2 % so that many queriers do not ask in the same instant. */
  jitter: number;
}

interface Instance {
  label: string;
  fqdn: string;
  ptr?: Lifetime;
  srv?: Lifetime;
  txt?: Lifetime & { hash: string };
  lastResolve: number;
  resolveAttempts: number;
}

class MdnsBrowserImpl implements MdnsBrowser {
  private readonly cache = new Map<string, Instance>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly serviceType: string;
  private readonly maxInstances: number;
  private queryInterval = FIRST_QUERY_INTERVAL_MS;
  private closed = false;

  constructor(
    private readonly socket: MdnsSocket,
    private readonly options: MdnsBrowserOptions,
    private readonly onError: (err: unknown) => void,
  ) {
    this.serviceType = options.serviceType ?? AMF_SERVICE_TYPE;
    this.maxInstances = Math.max(1, options.maxInstances ?? DEFAULT_MAX_INSTANCES);
    socket.onPacket((packet, origin) => {
      if (packet.type === 'response') this.onResponse(packet, origin);
    });
  }

  start(): void {
    this.later(20 + Math.random() * 100, () => this.browseQuery());
    const sweep = setInterval(() => this.sweep(), SWEEP_MS);
    sweep.unref();
    this.timers.add(sweep);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    await this.socket.close();
  }

  /** The continuous PTR query; each one schedules the next at twice the interval. */
  private browseQuery(): void {
    const budget = { left: KNOWN_ANSWER_BUDGET };
    const now = Date.now();
    const known: MdnsRecord[] = [];
    // RFC 6762 7.1: list PTRs we hold with more than half their TTL left, so their owners stay quiet.
    for (const entry of this.cache.values()) {
      const left = entry.ptr ? entry.ptr.receivedAt + entry.ptr.ttlMs - now : 0;
      if (!entry.ptr || left <= entry.ptr.ttlMs / 2) continue;
      budget.left -= 40 + Buffer.byteLength(entry.fqdn);
      if (budget.left < 0) break;
      known.push(this.ptrFor(entry.fqdn, Math.floor(left / 1000)));
    }
    this.send([{ name: serviceDomain(this.serviceType), type: 'PTR', class: 'IN' }], known);
    const next = this.queryInterval;
    this.queryInterval = Math.min(this.queryInterval * 2, MAX_QUERY_INTERVAL_MS);
    this.later(next, () => this.browseQuery());
  }

  private onResponse(packet: MdnsPacket, origin: PacketOrigin): void {
    const now = Date.now();
    const service = canonicalName(serviceDomain(this.serviceType));
    const incomplete = new Set<Instance>();
    const records = [...(packet.answers ?? []), ...(packet.additionals ?? [])].slice(
      0,
      MAX_RECORDS_PER_PACKET,
    );
    for (const record of records) {
      if (
        typeof record?.name !== 'string' ||
        typeof record.ttl !== 'number' ||
        !isInternetClass(record.class)
      ) {
        continue;
      }
      let fqdn: string;
      if (
        record.type === 'PTR' &&
        canonicalName(record.name) === service &&
        typeof record.data === 'string'
      ) {
        fqdn = record.data;
      } else if (record.type === 'SRV' || record.type === 'TXT') {
        fqdn = record.name;
      } else {
        continue;
      }
      const label = instanceLabel(fqdn, this.serviceType);
      if (label === null) continue;
      const key = canonicalName(fqdn);
      if (record.ttl === 0) {
        this.forget(key, origin);
        continue;
      }
      const entry = this.touch(key, label, fqdn.replace(/\.$/, ''));
      const lifetime: Lifetime = {
        receivedAt: now,
        ttlMs: record.ttl * 1000,
        queries: 0,
        jitter: Math.random() * 0.02,
      };
      if (record.type === 'PTR') {
        entry.ptr = lifetime;
      } else if (record.type === 'SRV') {
        if (srvDataOf(record.data) !== null) entry.srv = lifetime;
      } else {
        const strings = txtStringsOf(record.data);
        if (strings === null) continue;
        const hash = createHash('sha256')
          .update(Buffer.concat(strings.flatMap((s) => [Buffer.from([s.length & 0xff]), s])))
          .digest('hex');
        const changed = entry.txt?.hash !== hash;
        entry.txt = { ...lifetime, hash };
        if (changed) this.emitAdvertisement(entry, strings, origin);
      }
      incomplete.add(entry);
    }
    this.resolve(
      [...incomplete].filter((e) => this.cache.get(canonicalName(e.fqdn)) === e && (!e.srv || !e.txt)),
      now,
    );
  }

  /** Asks for the SRV and TXT of instances we know only part of (at most once a second each). */
  private resolve(entries: Instance[], now: number): void {
    const questions: MdnsQuestion[] = [];
    for (const entry of entries) {
      if (now - entry.lastResolve < RESOLVE_RETRY_MS || entry.resolveAttempts >= MAX_RESOLVE_ATTEMPTS)
        continue;
      entry.lastResolve = now;
      entry.resolveAttempts++;
      if (!entry.srv) questions.push({ name: entry.fqdn, type: 'SRV', class: 'IN' });
      if (!entry.txt) questions.push({ name: entry.fqdn, type: 'TXT', class: 'IN' });
    }
    this.send(questions, []);
  }

  /** Expires records whose TTL ran out and re-asks for those near the end of their lifetime. */
  private sweep(): void {
    const now = Date.now();
    const questions: MdnsQuestion[] = [];
    let askPtr = false;
    for (const [key, entry] of [...this.cache]) {
      const lifetimes: [string, Lifetime | undefined][] = [
        ['PTR', entry.ptr],
        ['SRV', entry.srv],
        ['TXT', entry.txt],
      ];
      if (lifetimes.some(([, l]) => l !== undefined && now - l.receivedAt >= l.ttlMs)) {
        this.forget(key);
        continue;
      }
      for (const [type, l] of lifetimes) {
        if (l === undefined || l.queries >= 4) continue;
        if ((now - l.receivedAt) / l.ttlMs < 0.8 + 0.05 * l.queries + l.jitter) continue;
        l.queries++;
        if (type === 'PTR') askPtr = true;
        else questions.push({ name: entry.fqdn, type, class: 'IN' });
      }
    }
    if (askPtr) questions.unshift({ name: serviceDomain(this.serviceType), type: 'PTR', class: 'IN' });
    this.send(questions, []);
    this.resolve(
      [...this.cache.values()].filter((e) => !e.srv || !e.txt),
      now,
    );
  }

  private emitAdvertisement(entry: Instance, strings: Buffer[], origin: PacketOrigin): void {
    const decoded = decodeTxt(strings);
    const ad: RawAdvertisement = {
      raw_id: randomUUID(),
      door: 'mdns',
      source: origin.address,
      received_at: new Date().toISOString(),
      txt: decoded.txt,
      txt_bytes: decoded.bytes,
      instance: entry.label,
      invalid_utf8: decoded.invalidUtf8,
      ...(decoded.duplicateKeys.length > 0 ? { duplicate_keys: decoded.duplicateKeys } : {}),
    };
    try {
      this.options.onAdvertisement(ad);
    } catch (err) {
      this.onError(err);
    }
  }

  /** Finds or creates an instance, marking it most recently heard; evicts the oldest past the cap. */
  private touch(key: string, label: string, fqdn: string): Instance {
    const existing = this.cache.get(key);
    if (existing) {
      this.cache.delete(key);
      this.cache.set(key, existing);
      return existing;
    }
    while (this.cache.size >= this.maxInstances) {
      const oldest = this.cache.keys().next();
      if (oldest.done === true) break;
      this.cache.delete(oldest.value);
    }
    const created: Instance = { label, fqdn, lastResolve: 0, resolveAttempts: 0 };
    this.cache.set(key, created);
    return created;
  }

  /** Drops an instance and reports its goodbye (unknown instances are ignored). */
  private forget(key: string, origin?: PacketOrigin): void {
    const entry = this.cache.get(key);
    if (!entry) return;
    this.cache.delete(key);
    try {
      this.options.onGoodbye?.(entry.label, origin);
    } catch (err) {
      this.onError(err);
    }
  }

  private ptrFor(fqdn: string, ttl: number): MdnsRecord {
    return { name: serviceDomain(this.serviceType), type: 'PTR', class: 'IN', ttl, data: fqdn };
  }

  /** Sends one or more queries (bounded in size); send failures are reported, never thrown. */
  private send(questions: MdnsQuestion[], known: MdnsRecord[]): void {
    if (this.closed) return;
    for (let i = 0; i < questions.length; i += MAX_QUESTIONS_PER_QUERY) {
      const packet: MdnsPacket = {
        type: 'query',
        id: 0,
        flags: 0,
        questions: questions.slice(i, i + MAX_QUESTIONS_PER_QUERY),
        answers: i === 0 ? known : [],
      };
      this.socket.send(packet).catch((err: unknown) => this.onError(err));
    }
  }

  private later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.closed) fn();
    }, ms);
    timer.unref();
    this.timers.add(timer);
  }
}
