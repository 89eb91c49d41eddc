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
 * Slots for remembered copies, reused in turn: a copy not seen again by the time its slot comes
 * round is forgotten. Copies are held only until their echo arrives (a few at a time under load).
 */
export const OWN_ECHOES_KEPT = 512;
/** Bytes hashed from the start of a message: an event's `id` (a UUID) lies within them. */
const HASHED_PREFIX_BYTES = 96;

interface Remembered {
  bytes: Uint8Array;
  /** Its slot in `slots`, cleared when the copy is taken so nothing is held after its echo. */
  slot: number;
}

export class OwnEchoes {
  private readonly byKey = new Map<number, Remembered[]>();
  private readonly slots: (Remembered | undefined)[] = [];
  private nextSlot = 0;
  private count = 0;

  constructor(private readonly kept = OWN_ECHOES_KEPT) {}

  /** Remembers `bytes` as published by this connection (the caller keeps them unchanged). */
  expect(bytes: Uint8Array): void {
    const slot = this.nextSlot;
    this.nextSlot = (slot + 1) % this.kept;
    const evicted = this.slots[slot];
    if (evicted) this.remove(evicted);
    const entry: Remembered = { bytes, slot };
    this.slots[slot] = entry;
    const key = prefixKey(bytes);
    const bucket = this.byKey.get(key);
    if (bucket) bucket.push(entry);
    else this.byKey.set(key, [entry]);
    this.count++;
  }

  /** True (and forgotten) when `data` is a remembered message, byte for byte. */
  take(data: Uint8Array): boolean {
    if (this.count === 0) return false;
    const bucket = this.byKey.get(prefixKey(data));
    if (!bucket) return false;
    for (const entry of bucket) {
      if (sameBytes(entry.bytes, data)) {
        this.remove(entry);
        return true;
      }
    }
    return false;
  }

  /** How many copies are expected (tests). */
  get size(): number {
    return this.count;
  }

  private remove(entry: Remembered): void {
    this.slots[entry.slot] = undefined;
    const key = prefixKey(entry.bytes);
    const bucket = this.byKey.get(key);
    const i = bucket ? bucket.indexOf(entry) : -1;
    if (!bucket || i < 0) return;
    if (bucket.length === 1) this.byKey.delete(key);
    else bucket.splice(i, 1);
    this.count--;
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
