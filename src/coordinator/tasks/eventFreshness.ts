/**
 * Whether an agent's signed event is fresh: sent recently, and never taken before (docs/security.md,
 * "Every event is fresh"). A signature proves who said something, not when: without this, a goodbye
 * copied from `/events` takes its agent offline half an hour later, and an old `active` heartbeat
 * keeps a hung worker live. Every signed event carries its key's run (`amfepoch`) and a counter of
 * that run (`amfseq`, identity/eventSignature.ts); the coordinator keeps, per key, the newest run and
 * which sequence numbers of it were taken, and refuses:
 *
 * - an event whose `time` is older than `maxAgeMs` or further in the future than `maxSkewMs`;
 * - an event of an earlier run of the key (the agent's own goodbye from before its restart);
 * - a sequence number already taken (a replay), or one so far behind the newest that its slot is no
 *   longer remembered (`window` numbers are kept, so events reordered across the agent's
 *   connections are still taken once each);
 * - a signed event without `amfepoch`/`amfseq`.
 *
 * One exception: a worker sends claims and progress both on the canonical subject and on the task's
 * reply subject, and several intake points check one event. A second sighting of a taken sequence
 * number within `copyGraceMs` of the first is the same event again (it changes nothing the first did
 * not), not a replay; event types that arrive once only (heartbeats) get no grace.
 *
 * The state is in memory: after a coordinator restart the first sighting of each key starts a new
 * record, so a replay within `maxAgeMs` of the original can be taken once by a restarted coordinator.
 */
import type { AmfEvent } from '../../events/cloudEvent.js';
import { EPOCH_ATTRIBUTE, MAX_SEQUENCE, SEQUENCE_ATTRIBUTE } from '../../identity/eventSignature.js';

/** Why an event was refused as not fresh. */
export type StaleReason = 'stale_event' | 'replayed_event' | 'unsequenced_event';

export type Freshness = { ok: true } | { ok: false; reason: StaleReason; message: string };

export interface EventFreshnessOptions {
  /** Oldest `time` taken (default 120 s): bounds what a restarted coordinator can be fed again. */
  maxAgeMs?: number;
  /** How far `time` or `amfepoch` may be ahead of this clock (default 30 s of skew between hosts). */
  maxSkewMs?: number;
  /** Sequence numbers remembered behind the newest of a run (default 4,096). */
  window?: number;
  /** How long a second copy of a taken event counts as the same event (default 10 s). */
  copyGraceMs?: number;
  /** Keys remembered at once (default 100,000); the least recently seen is dropped first. */
  maxKeys?: number;
  now?: () => number;
}

/** The event types whose freshness is checked: what an agent's liveness, endpoint or task depends on. */
export const FRESH_EVENT_TYPES: ReadonlySet<string> = new Set([
  'amf.discovery.agent.heartbeat',
  'amf.task.claim',
  'amf.task.progress',
  'amf.task.blocked',
  'amf.task.delegate',
]);

/** Types that reach an intake once (no copy on a reply subject): a second sighting is a replay. */
const SINGLE_COPY_TYPES: ReadonlySet<string> = new Set(['amf.discovery.agent.heartbeat']);

const EPOCH_PATTERN = /^[0-9]{1,16}$/;

interface KeyRun {
  epoch: number;
  maxSeq: number;
  /** Taken sequence numbers within the window, with when each was first taken. */
  seen: Map<number, number>;
}

export class EventFreshness {
  private readonly runs = new Map<string, KeyRun>();
  private readonly maxAgeMs: number;
  private readonly maxSkewMs: number;
  private readonly window: number;
  private readonly copyGraceMs: number;
  private readonly maxKeys: number;
  private readonly now: () => number;

  constructor(options: EventFreshnessOptions = {}) {
    this.maxAgeMs = options.maxAgeMs ?? 120_000;
    this.maxSkewMs = options.maxSkewMs ?? 30_000;
    this.window = Math.max(1, options.window ?? 4096);
    this.copyGraceMs = options.copyGraceMs ?? 10_000;
    this.maxKeys = Math.max(1, options.maxKeys ?? 100_000);
    this.now = options.now ?? Date.now;
  }

  /** True when events of this type are checked here. */
  applies(event: AmfEvent): boolean {
    return FRESH_EVENT_TYPES.has(event.type);
  }

  /**
   * Takes `event`, signed by `signer`, if it is fresh, and remembers it; otherwise says why not and
   * remembers nothing. Events of other types than {@link FRESH_EVENT_TYPES} are always fresh.
   */
  take(event: AmfEvent, signer: string): Freshness {
    if (!this.applies(event)) return { ok: true };
    const now = this.now();
    const sent = Date.parse(event.time);
    if (!Number.isFinite(sent)) return refuse('stale_event', 'its time does not parse');
    if (now - sent > this.maxAgeMs)
      return refuse(
        'stale_event',
        `sent ${seconds(now - sent)} ago, beyond the ${seconds(this.maxAgeMs)} an event is taken for (a replay, or held back by an outage)`,
      );
    if (sent - now > this.maxSkewMs)
      return refuse(
        'stale_event',
        `dated ${seconds(sent - now)} in the future (clocks more than ${seconds(this.maxSkewMs)} apart?)`,
      );
    const e = event as unknown as Record<string, unknown>;
    const epochText = e[EPOCH_ATTRIBUTE];
    const seq = e[SEQUENCE_ATTRIBUTE];
    if (
      typeof epochText !== 'string' ||
      !EPOCH_PATTERN.test(epochText) ||
      typeof seq !== 'number' ||
      !Number.isInteger(seq) ||
      seq < 0 ||
      seq > MAX_SEQUENCE
    )
      return refuse(
        'unsequenced_event',
        `it carries no valid ${EPOCH_ATTRIBUTE}/${SEQUENCE_ATTRIBUTE}, so a replay could not be told apart`,
      );
    const epoch = Number(epochText);
    if (epoch - now > this.maxSkewMs)
      return refuse('stale_event', `its run (${EPOCH_ATTRIBUTE} ${epochText}) starts in the future`);
    const run = this.runs.get(signer);
    if (run === undefined || epoch > run.epoch) {
      this.remember(signer, { epoch, maxSeq: seq, seen: new Map([[seq, now]]) });
      return { ok: true };
    }
    // Most recently seen last, so the oldest key is the first to go when the map is full.
    this.runs.delete(signer);
    this.runs.set(signer, run);
    if (epoch < run.epoch)
      return refuse(
        'replayed_event',
        `it belongs to an earlier run of the key (${EPOCH_ATTRIBUTE} ${epochText}; the current run began at ${run.epoch})`,
      );
    if (seq > run.maxSeq) {
      run.maxSeq = seq;
      run.seen.set(seq, now);
      // Pruned in batches: what falls behind the window is refused before `seen` is looked at.
      if (run.seen.size > 2 * this.window) {
        const oldest = seq - this.window;
        for (const s of run.seen.keys()) if (s <= oldest) run.seen.delete(s);
      }
      return { ok: true };
    }
    if (seq <= run.maxSeq - this.window)
      return refuse(
        'replayed_event',
        `${SEQUENCE_ATTRIBUTE} ${seq} is more than ${this.window} behind the newest (${run.maxSeq}) of this run`,
      );
    const first = run.seen.get(seq);
    if (first === undefined) {
      run.seen.set(seq, now);
      return { ok: true };
    }
    if (!SINGLE_COPY_TYPES.has(event.type) && now - first <= this.copyGraceMs) return { ok: true };
    return refuse(
      'replayed_event',
      `${SEQUENCE_ATTRIBUTE} ${seq} of this run was taken ${seconds(now - first)} ago: a replay`,
    );
  }

  private remember(signer: string, run: KeyRun): void {
    this.runs.delete(signer);
    if (this.runs.size >= this.maxKeys) {
      const oldest = this.runs.keys().next().value;
      if (oldest !== undefined) this.runs.delete(oldest);
    }
    this.runs.set(signer, run);
  }
}

function refuse(reason: StaleReason, message: string): Freshness {
  return { ok: false, reason, message };
}

function seconds(ms: number): string {
  return ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`;
}
