/**
 * The NATS side of the DMZ watcher: takes raw advertisements from `amf.internal.raw`, has each
 * judged in its own thread, and publishes the WatcherSummary on `amf.internal.classified`. It runs
 * on a watcher-role connection, whose ACL allows exactly that subscribe and that publish.
 *
 * When a thread fails (busy, timeout, crash) the service still answers, with a fail-closed summary
 * (risk 1.0, reason `watcher_<failure>`), so the coordinator denies at once instead of waiting for a
 * summary that will never come. That summary copies the same TXT fields a thread would, verbatim,
 * so the coordinator's cross-check (#9) sees no mismatch and the deny reason stays the risk.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../log.js';
import type { NatsConnection } from '../fabric/connect.js';
import type { AdvertisementDoor, RawAdvertisement } from '../discovery/advertisement.js';
import { SUBJECT_INTERNAL_CLASSIFIED, SUBJECT_INTERNAL_RAW } from '../events/subjects.js';
import { reportedFields, summaryText, validCapabilities } from './riskRules.js';
import { WatcherError, type DmzWatcher } from './watcherPool.js';
import type { WatcherSummary } from './watcherSummary.js';
import type { SummarySealer } from './summarySigning.js';

/** A raw-advertisement message larger than this is garbage (the TXT itself is at most 512 bytes). */
export const MAX_RAW_MESSAGE_BYTES = 16 * 1024;
/** Queue group of watcher services: with several running, each advertisement is judged once. */
export const WATCHER_QUEUE_GROUP = 'amf-watchers';

const MAX_TXT_KEYS = 64;
const MAX_FIELD_CHARS = 1024;
const DOORS: ReadonlySet<string> = new Set<AdvertisementDoor>(['mdns', 'nats']);

/** Options of {@link startWatcherService}. */
export interface WatcherServiceOptions {
  /** A connection as the `watcher` role user. */
  nc: NatsConnection;
  watcher: DmzWatcher;
  log?: Logger;
  /** Signs each summary (SPIFFE active); without it summaries go out plain. */
  seal?: SummarySealer;
}

/** A running watcher service. */
export interface WatcherService {
  /**
   * Stops taking advertisements and waits for those in flight to be answered. The connection and
   * the DmzWatcher belong to the caller and stay open.
   */
  close(): Promise<void>;
}

function shortString(v: unknown, max = MAX_FIELD_CHARS): v is string {
  return typeof v === 'string' && v.length <= max;
}

/**
 * Validates the shape of a decoded `amf.internal.raw` message and copies its known fields into a
 * fresh object (unknown fields are dropped). Undefined when it is not a RawAdvertisement.
 */
export function parseRawAdvertisement(value: unknown): RawAdvertisement | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const v = value as Record<string, unknown>;
  if (!shortString(v.raw_id, 128) || v.raw_id.length === 0) return undefined;
  if (typeof v.door !== 'string' || !DOORS.has(v.door)) return undefined;
  if (!shortString(v.source) || !shortString(v.received_at, 64)) return undefined;
  if (typeof v.txt_bytes !== 'number' || !Number.isFinite(v.txt_bytes) || v.txt_bytes < 0) return undefined;
  if (typeof v.txt !== 'object' || v.txt === null || Array.isArray(v.txt)) return undefined;
  const entries = Object.entries(v.txt as Record<string, unknown>);
  if (entries.length > MAX_TXT_KEYS) return undefined;
  const txt: Record<string, string> = {};
  for (const [key, val] of entries) {
    if (!shortString(key, 255) || !shortString(val)) return undefined;
    // defineProperty, not assignment: a "__proto__" key stays an ordinary (suspicious) key.
    Object.defineProperty(txt, key, { value: val, enumerable: true, writable: true, configurable: true });
  }
  const ad: RawAdvertisement = {
    raw_id: v.raw_id,
    door: v.door as AdvertisementDoor,
    source: v.source,
    received_at: v.received_at,
    txt,
    txt_bytes: v.txt_bytes,
  };
  if (v.instance !== undefined) {
    if (!shortString(v.instance)) return undefined;
    ad.instance = v.instance;
  }
  if (v.invalid_utf8 !== undefined) {
    if (typeof v.invalid_utf8 !== 'boolean') return undefined;
    ad.invalid_utf8 = v.invalid_utf8;
  }
  if (v.heartbeat_seconds !== undefined) {
    if (typeof v.heartbeat_seconds !== 'number' || !Number.isFinite(v.heartbeat_seconds)) return undefined;
    ad.heartbeat_seconds = v.heartbeat_seconds;
  }
  if (v.goodbye !== undefined) {
    if (typeof v.goodbye !== 'boolean') return undefined;
    ad.goodbye = v.goodbye;
  }
  return ad;
}

/**
 * The summary published when no thread produced one: maximal risk, the failure as the reason.
 * Built from plain field copies only — the main thread never interprets the advertisement.
 */
export function failClosedSummary(ad: RawAdvertisement, code: string): WatcherSummary {
  const capabilities = validCapabilities(ad);
  return {
    raw_id: ad.raw_id,
    ...reportedFields(ad),
    summary: summaryText(ad.txt.id, capabilities),
    risk_score: 1,
    risk_reason: code.toLowerCase(),
    extracted_capabilities: capabilities,
    approved: false,
    watcher_id: randomUUID(),
    processed_at: new Date().toISOString(),
    scorer: 'rules',
  };
}

/** Subscribes to `amf.internal.raw` and answers every valid advertisement on `amf.internal.classified`. */
export function startWatcherService(opts: WatcherServiceOptions): WatcherService {
  const { nc, watcher, log, seal } = opts;
  const inFlight = new Set<Promise<void>>();
  const decoder = new TextDecoder('utf-8', { fatal: true });

  const publish = async (summary: WatcherSummary): Promise<void> => {
    try {
      // A summary that cannot be signed goes out plain: the coordinator denies it as unsigned.
      const message = seal
        ? await seal(summary).catch((err: unknown) => {
            log?.warn({ raw_id: summary.raw_id, err: String(err) }, 'watcher: could not sign summary');
            return summary;
          })
        : summary;
      nc.publish(SUBJECT_INTERNAL_CLASSIFIED, JSON.stringify(message));
    } catch (err) {
      log?.warn({ raw_id: summary.raw_id, err: String(err) }, 'watcher: could not publish summary');
    }
  };

  const handle = async (ad: RawAdvertisement): Promise<void> => {
    let summary: WatcherSummary;
    try {
      summary = await watcher.judge(ad);
    } catch (err) {
      const code = err instanceof WatcherError ? err.code : 'WATCHER_CRASHED';
      // Only the id and the code: the advertisement's content is untrusted and stays out of logs.
      log?.warn({ raw_id: ad.raw_id, code }, 'watcher: no verdict, publishing a fail-closed summary');
      summary = failClosedSummary(ad, code);
    }
    await publish(summary);
  };

  const sub = nc.subscribe(SUBJECT_INTERNAL_RAW, {
    queue: WATCHER_QUEUE_GROUP,
    callback: (err, msg) => {
      if (err) {
        log?.warn({ err: String(err) }, 'watcher: subscription error');
        return;
      }
      if (msg.data.byteLength > MAX_RAW_MESSAGE_BYTES) {
        log?.debug({ bytes: msg.data.byteLength }, 'watcher: dropped oversized raw message');
        return;
      }
      let ad: RawAdvertisement | undefined;
      try {
        ad = parseRawAdvertisement(JSON.parse(decoder.decode(msg.data)));
      } catch {
        ad = undefined;
      }
      if (!ad) {
        log?.debug('watcher: dropped a raw message that is not a RawAdvertisement');
        return;
      }
      const p = handle(ad).finally(() => inFlight.delete(p));
      inFlight.add(p);
    },
  });

  let closing: Promise<void> | undefined;
  return {
    close() {
      closing ??= (async () => {
        sub.unsubscribe();
        await Promise.allSettled([...inFlight]);
      })();
      return closing;
    },
  };
}
