/**
 * The one admission pipeline both doors feed (mDNS TXT records and NATS heartbeats):
 *
 *   rate limit → dedupe by content → deterministic validation → raw on `amf.internal.raw` (connector
 *   role) → DMZ watcher → summary on `amf.internal.classified` → cross-verification → OPA → registry.
 *
 * Nothing enters the registry without passing it. An unchanged advertisement of an admitted agent
 * only refreshes its liveness; a changed one is judged again. Every structure that outside input can
 * grow is bounded, and repeated denials are reported once per window instead of once per packet.
 *
 * The doors are not equal (docs/security.md, "mDNS never gives power"). The NATS door is proven: the
 * heartbeat door passes on only advertisements signed with their key and fresh, sent with the data
 * dir's join credential or an enrolled key's own login. mDNS is hearsay: anyone on the LAN can send
 * any TXT record. So an mDNS advertisement is judged and listed `pending` (no NATS user, nothing
 * served) until the operator approves it; it never changes the liveness, endpoint or card of an
 * agent bound to a key (its goodbyes and re-advertisements are ignored, a changed one refused and
 * warned), and its goodbye counts only for a listing it made, from the address it came from.
 */
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { RawAdvertisement } from '../discovery/advertisement.js';
import type { AgentRecord } from '../events/agentRecord.js';
import { SUBJECT_INTERNAL_CLASSIFIED, SUBJECT_INTERNAL_RAW } from '../events/subjects.js';
import type { AgentRegistry, Verification } from '../registry/agentRegistry.js';
import type { PolicyNotices } from '../registry/policyNotices.js';
import type { PolicyEngine } from '../policy/policyEngine.js';
import type { WatcherSummary } from '../watcher/watcherSummary.js';
import { openClassified, type SummaryVerification } from '../watcher/summarySigning.js';
import type { SvidProof } from '../identity/svidProof.js';
import { BoundedCache } from '../util/boundedCache.js';
import { GcraLimiter } from '../util/gcraLimiter.js';
import { admissionInput, isSummary, svidVerified } from './admissionJudgement.js';
import { advertisementRef, describeAdvertisement } from './advertisementRef.js';
import { advertisementHash } from './advertisementHash.js';
import { verifyCard, warnUnverified, type CardFetcher } from './verifyCard.js';
import { validateAdvertisement } from './validateAdvertisement.js';
import { DenialReporter } from './denialReporter.js';
import type { LogFn } from '../log.js';

export interface AdmissionPipelineOptions {
  registry: AgentRegistry;
  notices: PolicyNotices;
  policy: PolicyEngine;
  /** Connector-role connection: may publish only `amf.internal.raw`. */
  connector: NatsConnection;
  /** Coordinator connection that reads `amf.internal.classified`. */
  coordinator: NatsConnection;
  trustDomain: string;
  identity: { mode: 'static' | 'spiffe'; svidVerified: boolean };
  mcpRequireTls: boolean;
  /** Emit `watcher_output_unverified` on every admission cycle (AMF_WATCHER_INTEGRITY_WARN). */
  integrityWarn: boolean;
  /**
   * SPIFFE active: watcher summaries must be signed (watcher/summarySigning.ts); unsigned or badly
   * signed ones are denied. Absent: plain summaries, and the integrity warning above.
   */
  summaryVerification?: SummaryVerification;
  /**
   * SPIFFE active: proves that a mesh/public advertiser holds the SVID of its agent id
   * (identity/svidProof.ts); the result is the policy's `identity.svid_verified`. Absent: only the
   * coordinator's own mode is reported, which admits local visibility alone.
   */
  proveSvid?: (record: AgentRecord) => Promise<SvidProof>;
  /**
   * Fetch and check the agent card (`card=`) before an admitted agent is offered anything (guarded
   * against SSRF). A card that does not load or does not match leaves the agent `unverified`.
   */
  fetchCards?: boolean;
  /** The card fetch (default: the guarded fetchAgentCard). */
  fetchCard?: CardFetcher;
  /** How long an unverified agent waits before its card is tried again on a re-advertisement. */
  cardRetryMs?: number;
  watcherTimeoutMs?: number;
  maxInFlight?: number;
  /** Liveness granted to agents seen only on mDNS (they send no heartbeats). */
  mdnsLivenessSeconds?: number;
  log?: LogFn;
  onDecision?: (outcome: AdmissionOutcome) => void;
}

export type AdmissionOutcome =
  | {
      kind: 'admitted';
      agentId: string;
      rawId: string;
      door: string;
      latencyMs: number;
      /** Set when the agent was admitted unverified: the reason code. */
      unverified?: string;
    }
  | {
      kind: 'denied';
      agentId: string | undefined;
      rawId: string;
      reasons: string[];
      stage: 'validation' | 'watcher' | 'policy' | 'busy';
    }
  /** Judged and allowed, but heard only on mDNS: listed `pending` until the operator approves it. */
  | { kind: 'pending'; agentId: string; rawId: string; latencyMs: number }
  | { kind: 'refreshed'; agentId: string }
  | { kind: 'dropped'; reason: DropReason };

/** Why an advertisement was dropped without a decision; `mdns_hint`: mDNS repeating a key-bound agent. */
export type DropReason = 'rate_limited' | 'duplicate' | 'recently_denied' | 'mdns_hint';

interface Pending {
  raw: RawAdvertisement;
  record: AgentRecord;
  hash: string;
  startedAt: number;
  timer: NodeJS.Timeout;
}

/** The source of an mDNS goodbye that is a record's TTL running out rather than a packet. */
export const MDNS_EXPIRED_SOURCE = 'mdns:expired';

/** True when `txt` would move an agent: another endpoint, card URL or MCP URL than it has. */
function changesWhereItLives(record: AgentRecord, txt: Record<string, string>): boolean {
  return txt.ep !== record.endpoint || txt.card !== record.card_url || txt.mcp !== record.mcp_endpoint;
}

const encoder = new TextEncoder();
const TRANSIENT_WATCHER_FAILURES = new Set([
  'watcher_busy',
  'watcher_timeout',
  'watcher_crashed',
  'watcher_closed',
]);
const decoder = new TextDecoder();

export class AdmissionPipeline {
  private readonly pending = new Map<string, Pending>();
  private readonly inFlightHashes = new Set<string>();
  private readonly admittedHash = new Map<string, string>();
  /** The content of each pending listing, so its unchanged repeats are not judged again. */
  private readonly pendingHash = new Map<string, string>();
  /**
   * mDNS instance → the listing it made (pending, or an approved keyless agent), with the address it
   * came from: the only thing an mDNS goodbye may take down. A denied instance is never mapped.
   */
  private readonly mdnsListings = new BoundedCache<{ agentId: string; source: string }>(4096, 24 * 3600_000);
  /** Content already denied: not judged again for a while (its deny was already reported). */
  private readonly denied = new BoundedCache<string>(20_000, 30_000);
  /** One rate-limit warning per source per window. */
  private readonly noticeWindow = new BoundedCache<number>(10_000, 10_000);
  /** Deny notices: deduplicated and globally budgeted, so a flood cannot become an event flood. */
  readonly denials: DenialReporter;
  /** Per source+agent: how fast advertisements may arrive at all. */
  private readonly perAdvertiser = new GcraLimiter({ ratePerSecond: 10, burst: 20, maxKeys: 20_000 });
  /** Per source: how many advertisements per second may go to a watcher, so one source cannot crowd out the rest. */
  private readonly perSourceJudging = new GcraLimiter({ ratePerSecond: 5, burst: 20, maxKeys: 10_000 });
  /** Unverified agents whose card was tried recently: not fetched again before the entry expires. */
  private readonly cardRetries: BoundedCache<true>;
  private sub: Subscription | undefined;
  readonly stats = { received: 0, admitted: 0, denied: 0, refreshed: 0, dropped: 0 };

  constructor(private readonly options: AdmissionPipelineOptions) {
    this.denials = new DenialReporter(options.notices);
    this.cardRetries = new BoundedCache<true>(20_000, options.cardRetryMs ?? 30_000);
  }

  start(): void {
    this.sub = this.options.coordinator.subscribe(SUBJECT_INTERNAL_CLASSIFIED, {
      callback: (err, msg) => {
        if (err) return;
        let value: unknown;
        try {
          value = JSON.parse(decoder.decode(msg.data));
        } catch {
          return;
        }
        void this.onClassified(value);
      },
    });
  }

  close(): void {
    this.sub?.unsubscribe();
    this.denials.close();
    for (const p of this.pending.values()) clearTimeout(p.timer);
    this.pending.clear();
    this.inFlightHashes.clear();
  }

  get inFlight(): number {
    return this.pending.size;
  }

  /** Entry point of both doors. Never throws; every outcome is reported or counted. */
  submit(raw: RawAdvertisement): void {
    this.stats.received++;
    const id = typeof raw.txt.id === 'string' ? raw.txt.id.slice(0, 256) : '';
    if (!this.perAdvertiser.allow(`${raw.source}|${id}`)) return this.drop('rate_limited', raw, id);
    if (raw.goodbye) {
      if (raw.door === 'mdns') return this.mdnsGoodbye(raw);
      // The heartbeat door passed it on: signed with the agent's key and fresh.
      if (id && this.options.registry.get(id)) this.options.registry.markOffline(id, 'goodbye');
      return;
    }
    if (raw.door === 'mdns' && this.mdnsIsOnlyAHint(raw, id)) return;
    const hash = advertisementHash(raw.txt);
    const listed = id ? this.options.registry.get(id) : undefined;
    if (raw.door === 'mdns' && listed?.status === 'pending' && this.pendingHash.get(id) === hash) {
      // The same hearsay again: the listing stays, nothing is judged or granted.
      this.options.registry.heard(id);
      this.stats.refreshed++;
      return;
    }
    const known = listed?.status === 'pending' ? undefined : listed;
    if (known && this.admittedHash.get(id) === hash) {
      // Same content as admitted: a heartbeat, not a new advertisement.
      const heartbeat = raw.heartbeat_seconds ?? (raw.door === 'mdns' ? this.mdnsLiveness() : undefined);
      const status = raw.txt.status as AgentRecord['status'] | undefined;
      this.options.registry.admit({
        ...known.record,
        status: status ?? 'active',
        ...(heartbeat !== undefined ? { heartbeat_seconds: heartbeat } : {}),
      });
      this.stats.refreshed++;
      this.rememberListing(raw, id);
      this.options.onDecision?.({ kind: 'refreshed', agentId: id });
      if (known.unverified && known.record.card_url && this.options.fetchCards && !this.cardRetries.get(id)) {
        this.cardRetries.set(id, true);
        void this.reverify(known.record, hash);
      }
      return;
    }
    if (this.denied.get(hash) !== undefined) return this.drop('recently_denied', raw, id);
    if (this.inFlightHashes.has(hash)) return this.drop('duplicate', raw, id);
    const check = validateAdvertisement(raw);
    if (!check.ok) {
      this.denied.set(hash, check.reason);
      this.deny(raw, id || undefined, [check.reason], check.message, 'validation');
      return;
    }
    if (!this.perSourceJudging.allow(raw.source) || this.pending.size >= (this.options.maxInFlight ?? 256)) {
      this.deny(
        raw,
        id,
        ['admission_busy'],
        'too many advertisements are being judged; advertise again later',
        'busy',
      );
      return;
    }
    const record = check.record;
    if (this.refusedRebinding(raw, record) || this.outsideEnrollment(raw, record)) return;
    if (raw.door === 'mdns' && record.heartbeat_seconds === undefined)
      record.heartbeat_seconds = this.mdnsLiveness();
    const timer = setTimeout(
      () => this.onWatcherTimeout(raw.raw_id),
      this.options.watcherTimeoutMs ?? 10_000,
    );
    timer.unref();
    this.pending.set(raw.raw_id, { raw, record, hash, startedAt: Date.now(), timer });
    this.inFlightHashes.add(hash);
    // Raw advertisements travel only on the connector's subject; the watcher reads them there.
    this.options.connector.publish(SUBJECT_INTERNAL_RAW, encoder.encode(JSON.stringify(raw)));
  }

  /**
   * A key is bound to its agent id at its first admission, and stays bound while the agent is
   * offline and across restarts (the registry's KV entries): an advertisement of that id with
   * another key (or none) is someone else until an operator forgets the agent.
   */
  private refusedRebinding(raw: RawAdvertisement, record: AgentRecord): boolean {
    const id = record.agent_id;
    const bound = this.options.registry.boundKey(id);
    if (bound === undefined || record.nkey === bound) return false;
    this.deny(
      raw,
      id,
      ['agent_key_mismatch'],
      `advertisement of ${id} refused: that id is bound to key ${bound}, this one ${record.nkey ? `names key ${record.nkey}` : 'names no key'} (to re-key it, forget the agent: amf agents forget ${id})`,
      'validation',
    );
    return true;
  }

  /**
   * An advertisement with an enrolled key may not claim more than the enrollment let in: no other
   * agent id than the one it was enrolled for, no tags beyond its tags.
   */
  private outsideEnrollment(raw: RawAdvertisement, record: AgentRecord): boolean {
    const enrollment = record.nkey === undefined ? undefined : this.options.registry.enrollment(record.nkey);
    if (!enrollment) return false;
    const id = record.agent_id;
    // An invite enrolled without tags is not scoped; an approval is for the tags the operator saw.
    const scoped = enrollment.via === 'approval' || enrollment.tags.length > 0;
    const extra = scoped ? (record.capability_tags ?? []).filter((t) => !enrollment.tags.includes(t)) : [];
    const problem =
      enrollment.agent_id !== undefined && enrollment.agent_id !== id
        ? `key ${enrollment.nkey} was enrolled (${enrollment.via}) for ${enrollment.agent_id}, not ${id}`
        : extra.length > 0
          ? `key ${enrollment.nkey} was enrolled (${enrollment.via}) for tags ${enrollment.tags.join(', ') || '(none)'}; ${extra.join(', ')} ${extra.length === 1 ? 'is' : 'are'} beyond it`
          : undefined;
    if (problem === undefined) return false;
    this.deny(raw, id, ['outside_enrollment'], `advertisement of ${id} refused: ${problem}`, 'validation');
    return true;
  }

  /**
   * mDNS against an agent it cannot speak for: true when the advertisement was handled here. An id
   * bound to a key changes only by that key's signed heartbeat over NATS: an mDNS record naming
   * another key is refused (`agent_key_mismatch`), one that would change the endpoint, card or MCP
   * URL is refused (`mdns_not_authoritative`), and an unchanged repeat is dropped as a mere hint. An
   * approved keyless agent is heard only from the address it was approved from, with the URLs it was
   * approved with; an id admitted through a proven door without a key is not mDNS's to change.
   */
  private mdnsIsOnlyAHint(raw: RawAdvertisement, id: string): boolean {
    if (!id) return false;
    const { registry } = this.options;
    const known = registry.get(id);
    const bound = registry.boundKey(id);
    const nk = raw.txt.nk;
    const refuse = (reason: string, message: string): true => {
      this.deny(raw, id, [reason], message, 'validation');
      return true;
    };
    if (bound !== undefined) {
      if (nk !== bound)
        return refuse(
          'agent_key_mismatch',
          `mDNS advertisement of ${id} refused: that id is bound to key ${bound}, this one ${nk ? `names key ${nk}` : 'names no key'} (to re-key it, forget the agent: amf agents forget ${id})`,
        );
      if (known && known.status !== 'pending' && changesWhereItLives(known.record, raw.txt))
        return refuse(
          'mdns_not_authoritative',
          `mDNS advertisement of ${id} refused: it would move the agent (endpoint, card or MCP URL), and an agent bound to a key changes those only by a signed heartbeat over NATS`,
        );
      this.drop('mdns_hint', raw, id);
      return true;
    }
    if (!known || known.status === 'pending') return false;
    const approval = registry.keylessApproval(id);
    if (!approval)
      return refuse(
        'mdns_not_authoritative',
        `mDNS advertisement of ${id} refused: that agent was admitted through a proven door, which mDNS cannot speak for`,
      );
    if (approval.source !== raw.source)
      return refuse(
        'mdns_not_authoritative',
        `mDNS advertisement of ${id} refused: the operator approved it from ${approval.source}, this came from ${raw.source}`,
      );
    if (nk !== undefined || changesWhereItLives(known.record, raw.txt))
      return refuse(
        'mdns_not_authoritative',
        `mDNS advertisement of ${id} refused: it changes what the operator approved (key, endpoint, card or MCP URL); forget and approve the agent again`,
      );
    return false;
  }

  /**
   * An mDNS goodbye (TTL 0, or the record's TTL ran out): it takes down only a listing that mDNS
   * made — a pending agent, or an approved keyless one — and, for a TTL-0 packet, only when it came
   * from the address that listing was heard from. An agent bound to a key is never touched.
   */
  private mdnsGoodbye(raw: RawAdvertisement): void {
    const listing = raw.instance === undefined ? undefined : this.mdnsListings.get(raw.instance);
    if (!listing) return;
    // An expiry is reported with the browser's own name as its source: the record simply ran out.
    if (raw.source !== MDNS_EXPIRED_SOURCE && raw.source !== listing.source) return;
    const { registry } = this.options;
    const agent = registry.get(listing.agentId);
    this.mdnsListings.delete(raw.instance!);
    if (!agent || registry.boundKey(listing.agentId) !== undefined) return;
    if (agent.status === 'pending') {
      if (agent.heardFrom?.source !== listing.source) return;
      registry.remove(listing.agentId, 'goodbye');
      this.pendingHash.delete(listing.agentId);
      return;
    }
    if (agent.approval?.source === listing.source) registry.markOffline(listing.agentId, 'goodbye');
  }

  /** Remembers which listing an mDNS instance made (for its goodbye). */
  private rememberListing(raw: RawAdvertisement, agentId: string): void {
    if (raw.door === 'mdns' && raw.instance !== undefined)
      this.mdnsListings.set(raw.instance, { agentId, source: raw.source });
  }

  private mdnsLiveness(): number {
    return this.options.mdnsLivenessSeconds ?? 1200;
  }

  private drop(reason: DropReason, raw: RawAdvertisement, id: string): void {
    this.stats.dropped++;
    this.options.onDecision?.({ kind: 'dropped', reason });
    if (reason === 'rate_limited' && this.noticeWindow.get(`${raw.source}|rate`) === undefined) {
      this.noticeWindow.set(`${raw.source}|rate`, 1);
      this.options.notices.warn({
        reason: 'advertisement_rate_limited',
        message: `advertisements from ${raw.source}${id ? ` for ${id}` : ''} exceed the rate limit; excess is dropped for a while`,
        details: { source: raw.source, door: raw.door },
      });
    }
  }

  private finish(rawId: string): Pending | undefined {
    const p = this.pending.get(rawId);
    if (!p) return undefined;
    clearTimeout(p.timer);
    this.pending.delete(rawId);
    this.inFlightHashes.delete(p.hash);
    return p;
  }

  private onWatcherTimeout(rawId: string): void {
    const p = this.finish(rawId);
    if (!p) return;
    this.deny(
      p.raw,
      p.record.agent_id,
      ['watcher_timeout'],
      'the DMZ watcher gave no summary in time',
      'watcher',
    );
  }

  /** Opens a classified message (checking its signature under SPIFFE), then judges the summary. */
  private async onClassified(value: unknown): Promise<void> {
    const opened = await openClassified(value, this.options.summaryVerification);
    if (!opened.ok) {
      // Only an advertisement we are waiting for is denied: stray output changes nothing.
      const p = opened.rawId !== undefined ? this.finish(opened.rawId) : undefined;
      if (p) this.deny(p.raw, p.record.agent_id, [opened.reason], opened.message, 'watcher');
      else this.options.log?.('warn', `watcher output refused: ${opened.message}`, { reason: opened.reason });
      return;
    }
    if (isSummary(opened.summary)) await this.onSummary(opened.summary, opened.signer !== undefined);
  }

  private async onSummary(summary: WatcherSummary, signed: boolean): Promise<void> {
    const p = this.finish(summary.raw_id);
    if (!p) return;
    const { record, raw } = p;
    const verified = await svidVerified(this.options, record);
    const { input, risk } = admissionInput(this.options, record, raw.door, summary, verified);
    let decision;
    try {
      decision = await this.options.policy.admission(input);
    } catch (err) {
      this.deny(
        raw,
        record.agent_id,
        ['policy_unavailable'],
        `policy evaluation failed: ${(err as Error).message}`,
        'policy',
      );
      return;
    }
    if (this.options.integrityWarn && !signed) {
      this.options.notices.warn({
        reason: 'watcher_output_unverified',
        message: `watcher summary for ${record.agent_id} is unsigned: SPIFFE is not active, so watcher output integrity is not verified`,
        agent_id: record.agent_id,
      });
    }
    if (!decision.allow) {
      // A watcher that was busy, slow or crashed says nothing about the agent: judge it again next time.
      if (!TRANSIENT_WATCHER_FAILURES.has(summary.risk_reason))
        this.denied.set(p.hash, decision.reasons.join(','));
      this.deny(
        raw,
        record.agent_id,
        decision.reasons,
        `policy denied ${record.agent_id}: ${decision.reasons.join(', ')} (risk ${risk.toFixed(2)}, threshold ${decision.threshold})`,
        'policy',
      );
      const listed = this.options.registry.get(record.agent_id);
      // mDNS takes down only what mDNS listed: a denied packet never removes a proven agent.
      const mayRemove = raw.door !== 'mdns' || listed?.status === 'pending' || listed?.approval !== undefined;
      if (listed && mayRemove) {
        this.options.registry.remove(record.agent_id, 'readvertisement_denied');
        this.admittedHash.delete(record.agent_id);
        this.pendingHash.delete(record.agent_id);
      }
      return;
    }
    let verification: Verification = { verified: true };
    if (this.options.fetchCards && record.card_url) {
      // The same content arriving during the fetch is a duplicate, not a new advertisement to judge.
      this.inFlightHashes.add(p.hash);
      try {
        verification = await verifyCard(record, this.options.fetchCard);
      } finally {
        this.inFlightHashes.delete(p.hash);
      }
      this.cardRetries.set(record.agent_id, true);
    }
    // Checked again: another advertisement of this id may have bound a key while this one was judged.
    if (this.refusedRebinding(raw, record)) return;
    if (raw.door === 'mdns' && !this.options.registry.keylessApproval(record.agent_id)) {
      // Hearsay: listed, never served. A proven door may have admitted the id meanwhile; then nothing.
      if (this.options.registry.boundKey(record.agent_id) !== undefined) return;
      const listed = this.options.registry.get(record.agent_id);
      if (listed && listed.status !== 'pending') return;
      this.options.registry.listPending(record, verification, {
        source: raw.source,
        ...(raw.instance !== undefined ? { instance: raw.instance } : {}),
      });
      this.pendingHash.set(record.agent_id, p.hash);
      if (this.pendingHash.size > 50_000) this.pendingHash.delete(this.pendingHash.keys().next().value!);
      this.rememberListing(raw, record.agent_id);
      this.options.onDecision?.({
        kind: 'pending',
        agentId: record.agent_id,
        rawId: raw.raw_id,
        latencyMs: Date.now() - p.startedAt,
      });
      return;
    }
    this.pendingHash.delete(record.agent_id);
    this.rememberListing(raw, record.agent_id);
    this.admittedHash.set(record.agent_id, p.hash);
    if (this.admittedHash.size > 50_000) this.admittedHash.delete(this.admittedHash.keys().next().value!);
    this.options.registry.admit(record, verification);
    if (!verification.verified) warnUnverified(this.options.notices, raw, record, verification);
    this.stats.admitted++;
    this.options.onDecision?.({
      kind: 'admitted',
      agentId: record.agent_id,
      rawId: raw.raw_id,
      door: raw.door,
      latencyMs: Date.now() - p.startedAt,
      ...(verification.verified ? {} : { unverified: verification.reason }),
    });
  }

  /** Tries the card of an unverified agent again; on success the agent becomes live. */
  private async reverify(record: AgentRecord, hash: string): Promise<void> {
    const verification = await verifyCard(record, this.options.fetchCard);
    const current = this.options.registry.get(record.agent_id);
    // Re-advertised differently meanwhile (or gone): that advertisement is judged on its own.
    if (!current?.unverified || this.admittedHash.get(record.agent_id) !== hash) return;
    if (verification.verified) this.options.registry.admit(current.record, verification);
  }

  private deny(
    raw: RawAdvertisement,
    agentId: string | undefined,
    reasons: string[],
    message: string,
    stage: 'validation' | 'watcher' | 'policy' | 'busy',
  ): void {
    this.stats.denied++;
    this.options.onDecision?.({ kind: 'denied', agentId, rawId: raw.raw_id, reasons, stage });
    const ref = advertisementRef(raw, agentId);
    this.denials.deny(`${raw.source}|${reasons.join(',')}|${agentId ?? ref.instance ?? ref.endpoint ?? ''}`, {
      reason: reasons[0] ?? 'advertisement_denied',
      // The message names what was judged too: a deny without an id must still point somewhere.
      message: `${message} [${describeAdvertisement(ref)}]`,
      ...(agentId ? { agent_id: agentId } : {}),
      advertisement: ref,
      details: { reasons, stage, door: raw.door, source: raw.source, raw_id: raw.raw_id },
    });
  }
}
