/**
 * The coordinator's orders to agents — `amf.task.cancel`, `amf.policy.deny`, `amf.task.input`, and
 * the warnings that tell an agent it is disabled or enabled (SWITCH_REASONS) — are
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

/**
 * Warnings an agent acts on when they name it: disabled or enabled by the operator, or a claim
 * refused because it is disabled (it stops pulling work until enabled: registry/disablements.ts).
 */
export const SWITCH_REASONS: ReadonlySet<string> = new Set([
  'agent_disabled',
  'agent_enabled',
  'claim_from_disabled_agent',
]);

/** True when `event` is one of the coordinator's orders (signed, acted on by the agent it names). */
function isOrder(event: AmfEvent): boolean {
  if (ORDER_TYPES.has(event.type)) return true;
  if (event.type !== 'amf.policy.warning') return false;
  const reason = (event.data.payload as { reason?: unknown }).reason;
  return typeof reason === 'string' && SWITCH_REASONS.has(reason);
}

/** An EventBus `sign` hook: signs the coordinator's orders with `key`, leaves other events as they are. */
export function signOrders(key: AgentKey): (event: AmfEvent) => void {
  return (event) => {
    if (isOrder(event)) signEvent(event, key);
  };
}
