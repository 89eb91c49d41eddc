/**
 * An advertisement as it arrives at either door of discovery — an mDNS TXT record, or an AgentRecord
 * heartbeat on NATS (mapped to the same TXT keys) — before anything about it is trusted. Both doors
 * hand these to the one admission pipeline.
 */

/** The TXT keys of `_amf-agent._tcp` records (notes/amf.md section 2). */
export const TXT_KEYS = [
  'id',
  'ep',
  'proto',
  'tags',
  'td',
  'vis',
  'v',
  'status',
  'card',
  'mcp',
  'nk',
] as const;
export type TxtKey = (typeof TXT_KEYS)[number];

/** The whole TXT record (all key=value strings with their length bytes) may not exceed this. */
export const MAX_TXT_BYTES = 512;

export type AdvertisementDoor = 'mdns' | 'nats';

export interface RawAdvertisement {
  /** Correlates the raw advertisement with the watcher's summary (UUID). */
  raw_id: string;
  door: AdvertisementDoor;
  /** Who sent it: the sender address for mDNS, the NATS sender identity for heartbeats. Used for rate limits. */
  source: string;
  received_at: string;
  /** TXT key/value pairs exactly as received (values are strings; invalid UTF-8 arrives as U+FFFD and fails validation). */
  txt: Record<string, string>;
  /** Serialized TXT size in bytes (length-prefixed strings, as on the wire). */
  txt_bytes: number;
  /** mDNS service instance name, when it came by mDNS. */
  instance?: string;
  /** Set when the TXT bytes were not valid UTF-8. */
  invalid_utf8?: boolean;
  /** Keys that appeared more than once (case-insensitively): two values that disagree, e.g. `id=a` and `ID=b`. */
  duplicate_keys?: string[];
  /** Heartbeat period announced by a NATS heartbeat (seconds). */
  heartbeat_seconds?: number;
  /** The agent says goodbye (mDNS TTL 0 or status=offline). */
  goodbye?: boolean;
}
