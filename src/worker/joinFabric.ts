/**
 * How an agent with its own key gets onto the fabric: over the join connection (a user that may only
 * publish advertisements) it sends its signed heartbeat until the coordinator has admitted it and
 * granted its key a NATS user, then connects as that user. Admission takes as long as the watcher
 * and policy take; an agent that is denied never gets a user, and says so when it gives up.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { AmfEvent } from '../events/cloudEvent.js';
import {
  connectAsAgent,
  isPassingDialFailure,
  NatsAuthError,
  RECONNECT_FOREVER,
  type AgentNkey,
} from '../fabric/connect.js';
import { EventBus } from '../fabric/eventBus.js';
import { AmfError } from '../errors.js';

export interface JoinFabricOptions {
  natsUrl: string;
  /** The connection as the join user (kept open by the caller for heartbeats). */
  joinConnection: NatsConnection;
  key: AgentNkey;
  /** NATS connection name of the agent's own connection. */
  name: string;
  /** A fresh signed heartbeat each time one is sent. */
  heartbeat: () => AmfEvent;
  /** Between attempts (default 250 ms). */
  retryMs?: number;
  /** Give up after this long (default 60 s). */
  timeoutMs?: number;
}

/** Resolves the agent's own connection once its key is admitted; rejects after `timeoutMs`. */
export async function joinFabric(opts: JoinFabricOptions): Promise<NatsConnection> {
  const bus = new EventBus(opts.joinConnection);
  const retryMs = opts.retryMs ?? 250;
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  let lastHeartbeat = 0;
  for (;;) {
    // Heartbeats once a second at most: the admission pipeline rate-limits each advertiser.
    if (Date.now() - lastHeartbeat >= 1_000) {
      bus.publish(opts.heartbeat());
      await bus.flush();
      lastHeartbeat = Date.now();
    }
    try {
      return await connectAsAgent(opts.natsUrl, opts.key, opts.name, {
        ...RECONNECT_FOREVER,
        maxReconnectAttempts: -1,
      });
    } catch (err) {
      // Not granted yet, or a dial that did not finish (a loaded machine, a server reloading its
      // users): both are worth another heartbeat and try until the deadline.
      if (!(err instanceof NatsAuthError) && !isPassingDialFailure(err)) throw err;
    }
    if (Date.now() > deadline)
      throw new AmfError(
        'UNAVAILABLE',
        `not admitted within ${Math.round(timeoutMs / 1000)} s: the coordinator did not grant key ${opts.key.publicKey} ` +
          `(see \`amf events --subject amf.policy.>\` for a deny naming this agent)`,
      );
    await new Promise((resolve) => setTimeout(resolve, retryMs));
  }
}
