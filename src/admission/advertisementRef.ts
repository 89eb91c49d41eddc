/** How notices and messages name an advertisement: the door, the sender, and what it said. */
import type { RawAdvertisement } from '../discovery/advertisement.js';
import type { AdvertisementRef } from '../events/payloads.js';

/** Longest advertised value copied into a notice (TXT values are short; a heartbeat's need not be). */
const MAX_REF_CHARS = 256;

/** What a notice about `raw` names: the door, the sender, and whatever the advertisement said. */
export function advertisementRef(raw: RawAdvertisement, agentId?: string): AdvertisementRef {
  const ref: AdvertisementRef = {
    door: raw.door,
    source: raw.source.slice(0, MAX_REF_CHARS),
    raw_id: raw.raw_id,
  };
  if (raw.instance !== undefined) ref.instance = raw.instance.slice(0, MAX_REF_CHARS);
  const ep = raw.txt.ep;
  if (typeof ep === 'string' && ep !== '') ref.endpoint = ep.slice(0, MAX_REF_CHARS);
  const id = agentId ?? raw.txt.id;
  if (typeof id === 'string' && id !== '') ref.agent_id = id.slice(0, MAX_REF_CHARS);
  return ref;
}

/** One line naming an advertisement, for messages (JSON-quoted: the values are the sender's). */
export function describeAdvertisement(ref: AdvertisementRef): string {
  const parts = [
    ref.instance !== undefined
      ? `mDNS instance ${JSON.stringify(ref.instance)}`
      : `${ref.door} advertisement`,
    `from ${ref.source}`,
    ref.endpoint !== undefined ? `endpoint ${JSON.stringify(ref.endpoint)}` : 'no endpoint',
  ];
  if (ref.agent_id !== undefined) parts.push(`id ${JSON.stringify(ref.agent_id)}`);
  return parts.join(', ');
}
