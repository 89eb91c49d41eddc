/**
 * How much the JetStream store of a spawned nats-server may reserve. JetStream counts every stream's
 * `max_bytes` against the disk when the stream is made, so AMF's defaults (about 2.6 GiB) once made
 * `amf up` fail on a small disk with nats-server's bare "insufficient storage resources available".
 * The budget is `nats.store_max_bytes` when configured, else half the data dir's free space; when it
 * is below the full reservation, every stream and bucket gets the same share of its default
 * (jetstream.ts, `storeScale`). `amf up` says what it reserved.
 */
import { statfs } from 'node:fs/promises';
import { fullReservation, minimumReservation, type RetentionLimits } from '../jetstream.js';

export interface StoreBudget {
  /** Multiplier of every byte limit (1 = the defaults). */
  scale: number;
  /** Bytes reserved in all. */
  reserved: number;
  /** Free bytes of the data dir's file system, when it could be read. */
  free?: number;
  /** Where the budget came from, for the log line. */
  source: 'configured' | 'free space' | 'defaults';
}

/** The data dir's free bytes (available to this user), or undefined when statfs cannot tell. */
export async function freeBytes(dir: string): Promise<number | undefined> {
  try {
    const s = await statfs(dir);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}

/** The store budget for a server whose store is in `dataDir`. */
export async function storeBudget(
  dataDir: string,
  configured: number | null,
  retention?: RetentionLimits,
  artifacts?: RetentionLimits,
): Promise<StoreBudget> {
  const full = fullReservation(retention, artifacts);
  const free = await freeBytes(dataDir);
  const budget = configured ?? (free !== undefined ? Math.floor(free / 2) : undefined);
  const source = configured !== null ? 'configured' : free !== undefined ? 'free space' : 'defaults';
  if (budget === undefined || budget >= full)
    return { scale: 1, reserved: full, ...(free !== undefined ? { free } : {}), source };
  // Each stream and bucket gets at least MIN_STORE_BYTES: the share above those floors is what scales,
  // so that floors and shares together stay within the budget (or at the floors, when it is smaller).
  const floors = minimumReservation();
  return {
    scale: Math.max(0, budget - floors) / full,
    reserved: Math.max(budget, floors),
    ...(free !== undefined ? { free } : {}),
    source,
  };
}

/** `1.5 GiB`, `300 MiB`: for the log line. */
export function formatBytes(bytes: number): string {
  const MiB = 1024 * 1024;
  return bytes >= 1024 * MiB ? `${(bytes / (1024 * MiB)).toFixed(1)} GiB` : `${Math.round(bytes / MiB)} MiB`;
}
