/**
 * Advertisement builders shared by the watcher tests: one clean, local, well-formed agent, and
 * variations of it with a few TXT values replaced.
 */
import { randomUUID } from 'node:crypto';
import type { RawAdvertisement } from '../../src/discovery/advertisement.js';

/** TXT values of a clean local agent on loopback. */
export const CLEAN_TXT: Readonly<Record<string, string>> = {
  id: 'spiffe://local/worker/echo-1',
  ep: 'http://127.0.0.1:8766',
  proto: 'A2A/1.0,MCP/2024-11-05',
  tags: 'echo,text-summarize',
  td: 'local',
  vis: 'local',
  v: '0.1.0',
  status: 'active',
  card: 'http://127.0.0.1:8766/.well-known/agent-card.json',
  mcp: 'http://localhost:8766/mcp',
};

/** A raw advertisement: the clean TXT with `overrides` applied (an `undefined` value removes the key). */
export function makeAd(
  overrides: Record<string, string | undefined> = {},
  extra: Partial<RawAdvertisement> = {},
): RawAdvertisement {
  const txt: Record<string, string> = { ...CLEAN_TXT };
  for (const [k, v] of Object.entries(overrides)) {
    if (v === undefined) delete txt[k];
    else txt[k] = v;
  }
  const txtBytes = Object.entries(txt).reduce((n, [k, v]) => n + 1 + Buffer.byteLength(`${k}=${v}`), 0);
  return {
    raw_id: randomUUID(),
    door: 'mdns',
    source: '127.0.0.1',
    received_at: new Date().toISOString(),
    txt,
    txt_bytes: txtBytes,
    ...extra,
  };
}
