/**
 * The UTF-8 bytes of a value's JSON text, for what the mesh publishes on NATS.
 *
 * `Buffer.from` cuts short texts out of Node's shared 8 KiB pool, where `TextEncoder` gives every
 * message an ArrayBuffer of its own: it is faster for events of the mesh's size, and it leaves the
 * garbage collector one backing store per 8 KiB instead of one per message (docs/performance.md).
 * The pool's slices are never written again, so a slice kept by the NATS client (while it
 * reconnects) stays intact; nothing here may transfer or detach the underlying ArrayBuffer.
 */
export function jsonBytes(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value), 'utf8');
}
