/**
 * The coordinator's orders to agents — `amf.task.cancel`, `amf.policy.deny`, `amf.task.input` — are
 * signed with its own key (identity/coordinatorKey.ts), so an agent that knows that key (from the
 * data dir on one machine, from its invite on another) acts only on orders the coordinator really
 * gave (worker/coordinatorOrders.ts), not on anything a connection with the coordinator's role name
 * in the envelope says. NATS permissions already keep agents from publishing them; the signature
 * makes the order checkable by its reader, and fresh like every signed event.
 */
import type { AmfEvent } from '../events/cloudEvent.js';
import type { AgentKey } from '../identity/agentKey.js';
import { signEvent } from '../identity/eventSignature.js';

/** The event types agents act on when a coordinator sends them. */
export const ORDER_TYPES: ReadonlySet<string> = new Set([
  'amf.task.cancel',
  'amf.policy.deny',
  'amf.task.input',
]);

/** An EventBus `sign` hook: signs the coordinator's orders with `key`, leaves other events as they are. */
export function signOrders(key: AgentKey): (event: AmfEvent) => void {
  return (event) => {
    if (ORDER_TYPES.has(event.type)) signEvent(event, key);
  };
}
