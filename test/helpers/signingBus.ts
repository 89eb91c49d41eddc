/**
 * An EventBus that signs what it publishes with an agent's key, as MeshWorker does: tests that play
 * an agent by hand (a "ghost" with no handler) speak as that agent, and the coordinator believes them.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { AmfEvent } from '../../src/events/cloudEvent.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import type { AgentKey } from '../../src/identity/agentKey.js';
import { signEvent } from '../../src/identity/eventSignature.js';

export class SigningBus extends EventBus {
  constructor(
    nc: NatsConnection,
    readonly key: AgentKey,
  ) {
    super(nc);
  }

  override publish(event: AmfEvent, ...subjects: string[]): void {
    super.publish(signEvent(event, this.key), ...subjects);
  }
}
