/**
 * The one admission pipeline both doors feed (mDNS TXT records and NATS heartbeats):
 *
 *   rate limit → dedupe by content → deterministic validation → raw on `amf.internal.raw` (connector
 *   role) → DMZ watcher → summary on `amf.internal.classified` → cross-verification → OPA → registry.
 *
 * Nothing enters the registry without passing it. An unchanged advertisement of an admitted agent
 * only refreshes its liveness; a changed one is judged again. Every structure that outside input can
 * grow is bounded, and repeated denials are reported once per window instead of once per packet.
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
  | { kind: 'refreshed'; agentId: string }
  | { kind: 'dropped'; reason: 'rate_limited' | 'duplicate' | 'recently_denied' };

interface Pending {
  raw: RawAdvertisement;
  record: AgentRecord;
  hash: string;
  startedAt: number;
  timer: NodeJS.Timeout;
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
      if (id && this.options.registry.get(id)) this.options.registry.markOffline(id, 'goodbye');
      return;
    }
    const hash = advertisementHash(raw.txt);
    const known = id ? this.options.registry.get(id) : undefined;
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
    if (this.refusedRebinding(raw, record)) return;
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

  private mdnsLiveness(): number {
    return this.options.mdnsLivenessSeconds ?? 1200;
  }

  private drop(
    reason: 'rate_limited' | 'duplicate' | 'recently_denied',
    raw: RawAdvertisement,
    id: string,
  ): void {
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
      if (this.options.registry.get(record.agent_id)) {
        this.options.registry.remove(record.agent_id, 'readvertisement_denied');
        this.admittedHash.delete(record.agent_id);
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
