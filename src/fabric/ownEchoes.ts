/**
 * The messages a connection published that will come back to it: NATS delivers a publisher's own
 * messages to its own matching subscriptions (echo). The coordinator's task lifecycle announces
 * every task and relays every final, and hears both again on `amf.task.>` and `amf.result.>`,
 * where the copy changes nothing. Recognising the copy by its bytes saves decoding and parsing it
 * (two of the six events the coordinator would otherwise parse per task).
 *
 * Only byte-for-byte equal messages are dropped, so a copy can never be mistaken for another event:
 * equal bytes are the same event, with the same id and signature. The memory is bounded; a copy
 * that comes back after it was forgotten is parsed and judged as before.
 */

/**
 * Slots for remembered copies, reused oldest first (a copy not seen again by then is forgotten):
 * at most this many messages are held, about 0.5 MB of events.
 */
export const OWN_ECHOES_KEPT = 512;
/** Bytes hashed from the start of a message: an event's `id` (a UUID) lies within them. */
const HASHED_PREFIX_BYTES = 96;

export class OwnEchoes {
  private readonly byKey = new Map<number, Uint8Array[]>();
  private readonly order: { key: number; bytes: Uint8Array }[] = [];
  private oldest = 0;

  constructor(private readonly kept = OWN_ECHOES_KEPT) {}

  /** Remembers `bytes` as published by this connection (the caller keeps them unchanged). */
  expect(bytes: Uint8Array): void {
    const key = prefixKey(bytes);
    const bucket = this.byKey.get(key);
    if (bucket) bucket.push(bytes);
    else this.byKey.set(key, [bytes]);
    if (this.order.length < this.kept) this.order.push({ key, bytes });
    else {
      const evicted = this.order[this.oldest] as { key: number; bytes: Uint8Array };
      this.forget(evicted.key, evicted.bytes);
      this.order[this.oldest] = { key, bytes };
      this.oldest = (this.oldest + 1) % this.kept;
    }
  }

  /** True (and forgotten) when `data` is a remembered message, byte for byte. */
  take(data: Uint8Array): boolean {
    if (this.byKey.size === 0) return false;
    const key = prefixKey(data);
    const bucket = this.byKey.get(key);
    if (!bucket) return false;
    for (let i = 0; i < bucket.length; i++) {
      if (sameBytes(bucket[i] as Uint8Array, data)) {
        this.removeAt(key, bucket, i);
        return true;
      }
    }
    return false;
  }

  /** How many copies are expected (tests, metrics). */
  get size(): number {
    let n = 0;
    for (const bucket of this.byKey.values()) n += bucket.length;
    return n;
  }

  private forget(key: number, bytes: Uint8Array): void {
    const bucket = this.byKey.get(key);
    const i = bucket ? bucket.indexOf(bytes) : -1;
    if (bucket && i >= 0) this.removeAt(key, bucket, i);
  }

  private removeAt(key: number, bucket: Uint8Array[], i: number): void {
    if (bucket.length === 1) this.byKey.delete(key);
    else bucket.splice(i, 1);
  }
}

/** FNV-1a over the length and the first bytes: cheap, and a collision only costs a comparison. */
function prefixKey(bytes: Uint8Array): number {
  let h = (0x811c9dc5 ^ bytes.length) >>> 0;
  const n = Math.min(bytes.length, HASHED_PREFIX_BYTES);
  for (let i = 0; i < n; i++) h = Math.imul(h ^ (bytes[i] as number), 0x01000193);
  return h >>> 0;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.compare(a, b) === 0;
}
