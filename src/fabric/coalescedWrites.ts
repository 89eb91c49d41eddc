/**
 * One socket write per event-loop turn and connection, instead of one per microtask checkpoint.
 *
 * nats.js queues every command (PUB, HPUB, SUB, PING, acks) in its outbound buffer and writes the
 * buffer to the socket from a microtask. A task's claim, its final, a JetStream offer and acks are
 * made in different callbacks of the same turn, so each became its own write() — and a write on a
 * loopback socket runs the whole TCP stack in the sender, a large share of a direct task's cost
 * (docs/performance.md). Here the write is moved to `setImmediate`, the end of the current turn:
 * everything queued meanwhile leaves in one write, in the same order. Nothing else changes: the
 * buffer is written at once when it reaches nats.js's own threshold, `flush()` and `drain()` send
 * everything before they resolve, and `close()` drops what is unsent as nats.js always did.
 *
 * This reaches into nats.js's connection (the `protocol` handler's `flushPending`, `outbound`
 * and `pendingLimit`, as in @nats-io/nats-core 3.x). When they are not there (another
 * nats.js), the connection is left as it is and writes as before.
 */
import type { NatsConnection } from '@nats-io/transport-node';

interface ProtocolInternals {
  flushPending: () => void;
  outbound: { size(): number };
  pendingLimit: number;
}

function internalsOf(nc: NatsConnection): ProtocolInternals | undefined {
  const protocol = (nc as unknown as { protocol?: Partial<ProtocolInternals> }).protocol;
  if (
    typeof protocol?.flushPending !== 'function' ||
    typeof protocol.outbound?.size !== 'function' ||
    typeof protocol.pendingLimit !== 'number'
  )
    return undefined;
  return protocol as ProtocolInternals;
}

/** Makes `nc` write its queued commands once per event-loop turn; false when it could not. */
export function coalesceWrites(nc: NatsConnection): boolean {
  const protocol = internalsOf(nc);
  if (!protocol) return false;
  const writeNow = protocol.flushPending.bind(protocol);
  let scheduled: NodeJS.Immediate | undefined;
  const writeScheduled = () => {
    scheduled = undefined;
    writeNow();
  };
  protocol.flushPending = () => {
    if (protocol.outbound.size() >= protocol.pendingLimit) {
      clearImmediate(scheduled);
      writeScheduled();
      return;
    }
    scheduled ??= setImmediate(writeScheduled);
  };
  return true;
}
