/**
 * Advertises one `_amf-agent._tcp.local` service instance by mDNS/DNS-SD (RFC 6762, RFC 6763):
 * probes for the instance name (three queries 250 ms apart, renaming to "name (2)" on a conflict and
 * deferring on a lost simultaneous-probe tiebreak), announces twice one second apart, answers queries
 * (PTR, SRV, TXT, A/AAAA and service type enumeration, with known-answer suppression, the shared-
 * record delay and per-record rate limit, and legacy unicast answers), re-announces when the TXT
 * changes, and says goodbye (TTL 0) on close. The records are built in serviceRecords.ts, the
 * answers to a query chosen in answers.ts. multicast-dns does the socket and packet encoding;
 * the protocol state lives here because the high-level libraries neither rename on conflict nor let
 * the caller see the raw TXT bytes.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { AmfError } from '../../errors.js';
import { canonicalName, checkLabel, hostAddresses, hostName, nextInstanceName } from './names.js';
import {
  AMF_SERVICE_TYPE,
  openMdnsSocket,
  type MdnsPacket,
  type MdnsRecord,
  type MdnsSocket,
  type PacketOrigin,
} from './socket.js';
import { compareRecordSets, rdataOf, recordSignature } from './records.js';
import { response, ServiceRecords, type ServiceConfig } from './serviceRecords.js';
import { MAX_QUESTIONS, selectAnswers } from './answers.js';
import { encodeTxt } from '../txtRecord.js';

/** Options of startMdnsAdvertiser. */
export interface MdnsAdvertiserOptions {
  /** Service instance name (one DNS label: 1–63 UTF-8 bytes, no dot). May change on conflict. */
  instanceName: string;
  /** Port of the service (SRV). */
  port: number;
  /** Target host name of the SRV record (`.local` is added); default `amf-<hostname>.local`. */
  host?: string;
  /** TXT pairs; encoded with encodeTxt, so more than 512 bytes is refused. */
  txt: Record<string, string>;
  /** IPv4 address of the one interface to advertise on; all interfaces when absent. */
  interfaceAddress?: string;
  /** Service type; AMF has exactly one. */
  serviceType?: typeof AMF_SERVICE_TYPE;
  /** Told about send failures and handler bugs after start; default: a process warning. */
  onError?: (err: unknown) => void;
}

/** A running advertisement. */
export interface MdnsAdvertiser {
  /** The instance name in use: the requested one, or "name (N)" after a conflict. */
  readonly instanceName: string;
  /** Replaces the TXT record and announces it (throws, changing nothing, if encodeTxt refuses it). */
  update(txt: Record<string, string>): void;
  /** Sends goodbye (TTL 0) for the instance's records and closes the socket. */
  close(): Promise<void>;
}

const PROBE_COUNT = 3;
const PROBE_INTERVAL_MS = 250;
const ANNOUNCE_INTERVAL_MS = 1000;
const TIEBREAK_DEFER_MS = 1000;
/** Below the 250 ms probe spacing, so timer jitter never makes us skip a defending answer. */
const PROBE_DEFENCE_GAP_MS = 200;

/**
 * Starts advertising. Resolves once the instance name is established (probed without conflict)
 * and first announced, so `instanceName` is final unless a later conflict forces a rename.
 * Rejects with INVALID_REQUEST for bad options or TXT, UNAVAILABLE when the socket cannot be used.
 */
export async function startMdnsAdvertiser(options: MdnsAdvertiserOptions): Promise<MdnsAdvertiser> {
  checkLabel(options.instanceName, 'instanceName');
  if (!Number.isInteger(options.port) || options.port < 1 || options.port > 65535) {
    throw new AmfError('INVALID_REQUEST', `port must be an integer 1..65535 (got ${options.port})`);
  }
  const host = hostName(options.host);
  const txt = encodeTxt(options.txt);
  const addresses = hostAddresses(options.interfaceAddress);
  const socket = await openMdnsSocket({
    ...(options.interfaceAddress === undefined ? {} : { interfaceAddress: options.interfaceAddress }),
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });
  const advertiser = new MdnsAdvertiserImpl(
    socket,
    options.onError ?? ((err) => process.emitWarning(String(err), 'AmfMdnsWarning')),
    { port: options.port, host, addresses, serviceType: options.serviceType ?? AMF_SERVICE_TYPE },
    options.instanceName,
    txt,
  );
  try {
    await advertiser.establish(true);
  } catch (err) {
    await advertiser.close();
    throw err instanceof AmfError
      ? err
      : new AmfError(
          'UNAVAILABLE',
          `mDNS advertising failed: ${err instanceof Error ? err.message : String(err)}`,
        );
  }
  return advertiser;
}

type AdvertiserState = 'probing' | 'announced' | 'closed';

class MdnsAdvertiserImpl implements MdnsAdvertiser {
  private state: AdvertiserState = 'probing';
  private readonly records: ServiceRecords;
  private readonly abort = new AbortController();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly lastMulticast = new Map<string, number>();
  /** Authority sections of our own probes: loopback brings them back, and they are no rival. */
  private readonly ownProbes = new Set<string>();
  private readonly conflictTimes: number[] = [];
  private conflict = false;
  private lostTiebreak = false;
  private announceRound = 0;

  constructor(
    private readonly socket: MdnsSocket,
    private readonly onError: (err: unknown) => void,
    config: ServiceConfig,
    name: string,
    txt: Buffer[],
  ) {
    this.records = new ServiceRecords(config, name, txt);
    socket.onPacket((packet, origin) => this.onPacket(packet, origin));
  }

  get instanceName(): string {
    return this.records.name;
  }

  update(txt: Record<string, string>): void {
    if (this.state === 'closed') throw new AmfError('INVALID_REQUEST', 'the mDNS advertiser is closed');
    this.records.txt = encodeTxt(txt);
    // RFC 6762 8.4: changed data is announced like new data; probing picks the new TXT up by itself.
    if (this.state === 'announced') this.announce().catch((err: unknown) => this.onError(err));
  }

  async close(): Promise<void> {
    if (this.state === 'closed') return;
    const wasAnnounced = this.state === 'announced';
    this.state = 'closed';
    this.abort.abort();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    if (wasAnnounced) {
      // The host records stay: other advertisers in this process may share the host name.
      const goodbye = [this.records.ptr(), this.records.srv(), this.records.txtRecord()].map((r) => ({
        ...r,
        ttl: 0,
      }));
      await this.socket.send(response(goodbye, [])).catch((err: unknown) => this.onError(err));
    }
    await this.socket.close();
  }

  /** Probes until the name is ours (renaming on conflict), then announces. */
  async establish(initialDelay: boolean): Promise<void> {
    const signal = this.abort.signal;
    // RFC 6762 8.1: a random 0–250 ms wait keeps hosts that start together from probing in step.
    if (initialDelay) await sleep(Math.random() * PROBE_INTERVAL_MS, undefined, { signal });
    for (;;) {
      this.state = 'probing';
      this.conflict = false;
      this.lostTiebreak = false;
      for (let i = 0; i < PROBE_COUNT && !this.conflict && !this.lostTiebreak; i++) {
        await this.socket.send(this.probePacket());
        await sleep(PROBE_INTERVAL_MS, undefined, { signal });
      }
      if (this.conflict) {
        this.records.name = nextInstanceName(this.records.name);
        this.ownProbes.clear();
        await this.conflictBackoff(signal);
      } else if (this.lostTiebreak) {
        await sleep(TIEBREAK_DEFER_MS, undefined, { signal });
      } else {
        break;
      }
    }
    this.state = 'announced';
    this.ownProbes.clear();
    await this.announce();
  }

  /** RFC 6762 8.1: after 15 conflicts within 10 s, wait 5 s before probing again. */
  private async conflictBackoff(signal: AbortSignal): Promise<void> {
    const now = Date.now();
    this.conflictTimes.push(now);
    while (this.conflictTimes.length > 0 && (this.conflictTimes[0] ?? now) < now - 10_000)
      this.conflictTimes.shift();
    if (this.conflictTimes.length >= 15) await sleep(5000, undefined, { signal });
  }

  /** Sends every record now and once more a second later (RFC 6762 8.3). */
  private async announce(): Promise<void> {
    const round = ++this.announceRound;
    const packet = () =>
      response(
        [
          this.records.ptr(),
          this.records.srv(),
          this.records.txtRecord(),
          ...this.records.hostRecords(),
          this.records.enumeration(),
        ],
        [],
      );
    await this.socket.send(packet());
    this.later(ANNOUNCE_INTERVAL_MS, () => {
      // A newer announcement (TXT update) supersedes this one's second send.
      if (round === this.announceRound && this.state === 'announced') return this.socket.send(packet());
    });
  }

  private onPacket(packet: MdnsPacket, origin: PacketOrigin): void {
    if (this.state === 'closed') return;
    if (packet.type === 'response') this.checkConflict(packet);
    else if (this.state === 'probing') this.checkRivalProbe(packet);
    else this.answer(packet, origin);
  }

  /** A response with other data for our unique records means the name is someone else's. */
  private checkConflict(packet: MdnsPacket): void {
    const ours = canonicalName(this.records.fqdn);
    const srv = rdataOf(this.records.srv());
    const txt = rdataOf(this.records.txtRecord());
    for (const record of [...(packet.answers ?? []), ...(packet.additionals ?? [])]) {
      if (typeof record?.name !== 'string' || canonicalName(record.name) !== ours || record.ttl === 0)
        continue;
      const theirs = rdataOf(record);
      if (theirs === null) continue;
      const differs =
        (record.type === 'SRV' && srv !== null && !theirs.equals(srv)) ||
        (record.type === 'TXT' && txt !== null && !theirs.equals(txt));
      if (!differs) continue;
      if (this.state === 'probing') {
        this.conflict = true;
      } else if (record.type === 'SRV') {
        // After announcing only SRV is checked: our own TXT changes (update) are still in flight
        // on the network and would look like a rival. RFC 6762 9: conflict → probe again.
        this.state = 'probing';
        this.establish(false).catch((err: unknown) => {
          if (!this.abort.signal.aborted) this.onError(err);
        });
      }
      return;
    }
  }

  /** RFC 6762 8.2: simultaneous probes for our name are settled by comparing the proposed records. */
  private checkRivalProbe(packet: MdnsPacket): void {
    const ours = canonicalName(this.records.fqdn);
    const theirs = (packet.authorities ?? []).filter(
      (r) => typeof r?.name === 'string' && canonicalName(r.name) === ours,
    );
    if (theirs.length === 0) return;
    const signature = recordSignature(theirs);
    if (this.ownProbes.has(signature)) return;
    if (compareRecordSets(this.records.probe(), theirs) < 0) this.lostTiebreak = true;
  }

  private answer(packet: MdnsPacket, origin: PacketOrigin): void {
    const { answers, extra } = selectAnswers(packet, this.records);
    if (answers.size === 0) return;
    if (origin.legacy) {
      // RFC 6762 6.7: a one-shot resolver gets a unicast reply with its ID and question, short TTLs
      // and no cache-flush bits (it is not an mDNS cache).
      const legacy = (r: MdnsRecord) => ({ ...r, ttl: Math.min(r.ttl ?? 0, 10), flush: false });
      const reply: MdnsPacket = {
        ...response([...answers.values()].map(legacy), [...extra.values()].map(legacy)),
        id: packet.id ?? 0,
        questions: (packet.questions ?? []).slice(0, MAX_QUESTIONS),
      };
      this.socket.send(reply, origin).catch((err: unknown) => this.onError(err));
      return;
    }
    // RFC 6762 6: at most one multicast of a record per second, but a probe for our name is answered
    // at once and at every probe (python-zeroconf probes with a PTR question and only counts the
    // PTR answers it has cached by its next probe, 250 ms later).
    const fqdn = canonicalName(this.records.fqdn);
    const probe = (packet.authorities ?? []).some(
      (r) =>
        (typeof r?.name === 'string' && canonicalName(r.name) === fqdn) ||
        (r?.type === 'PTR' && typeof r.data === 'string' && canonicalName(r.data) === fqdn),
    );
    const now = Date.now();
    const minGap = probe ? PROBE_DEFENCE_GAP_MS : 1000;
    for (const key of [...answers.keys()]) {
      if (now - (this.lastMulticast.get(key) ?? 0) < minGap) answers.delete(key);
    }
    if (answers.size === 0) return;
    // Shared records (PTR) may have many responders: a random 20–120 ms delay spreads them out.
    const shared = !probe && [...answers.values()].some((r) => r.type === 'PTR');
    const send = () => {
      if (this.state !== 'announced') return;
      const at = Date.now();
      for (const key of answers.keys()) this.lastMulticast.set(key, at);
      // The TXT may have been updated during the delay: never answer with the superseded one.
      const fresh = (r: MdnsRecord) => (r.type === 'TXT' ? this.records.txtRecord() : r);
      return this.socket.send(response([...answers.values()].map(fresh), [...extra.values()].map(fresh)));
    };
    if (shared) this.later(20 + Math.random() * 100, send);
    else send()?.catch((err: unknown) => this.onError(err));
  }

  /** Runs `fn` after `ms` unless closed first; failures go to onError. */
  private later(ms: number, fn: () => Promise<void> | undefined): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn()?.catch((err: unknown) => this.onError(err));
    }, ms);
    this.timers.add(timer);
  }

  private probePacket(): MdnsPacket {
    const authorities = this.records.probe();
    this.ownProbes.add(recordSignature(authorities));
    // QU would be preferred (RFC 6762 8.1) but dns-packet cannot set that bit; QM probes work too.
    return {
      type: 'query',
      id: 0,
      flags: 0,
      questions: [{ name: this.records.fqdn, type: 'ANY', class: 'IN' }],
      authorities,
    };
  }
}
