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
  /**
   * The connection as the join user (kept open by the caller for heartbeats). Absent for an enrolled
   * key, which needs no advertisement to be granted: it only waits for its user.
   */
  joinConnection?: NatsConnection;
  key: AgentNkey;
  /** NATS connection name of the agent's own connection. */
  name: string;
  /** A fresh signed heartbeat each time one is sent (with `joinConnection`). */
  heartbeat?: () => AmfEvent;
  /** Between attempts (default 250 ms). */
  retryMs?: number;
  /** Give up after this long (default 60 s). */
  timeoutMs?: number;
}

/** How long one dial of the agent's own user may take (the nats.js default), within the deadline. */
const JOIN_DIAL_TIMEOUT_MS = 20_000;

/** Resolves the agent's own connection once its key is admitted; rejects after `timeoutMs`. */
export async function joinFabric(opts: JoinFabricOptions): Promise<NatsConnection> {
  const bus = opts.joinConnection ? new EventBus(opts.joinConnection) : undefined;
  const retryMs = opts.retryMs ?? 250;
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  // Heartbeats go out on their own clock, once a second (the admission pipeline rate-limits each
  // advertiser), whatever the dials do: an agent is granted its user only while it is live, and a
  // dial that hangs on a loaded machine must not let it miss heartbeats, go offline and lose the
  // grant it is waiting for (seen in the fault drill: 20 s dials, a grant that never held).
  const beat = () => {
    if (!bus || !opts.heartbeat) return;
    try {
      bus.publish(opts.heartbeat());
    } catch {
      // The join connection is closed: the caller is giving up anyway.
    }
  };
  beat();
  const heartbeats = setInterval(beat, 1_000);
  heartbeats.unref();
  try {
    for (;;) {
      try {
        return await connectAsAgent(opts.natsUrl, opts.key, opts.name, {
          ...RECONNECT_FOREVER,
          maxReconnectAttempts: -1,
          dialTimeoutMs: Math.max(1_000, Math.min(JOIN_DIAL_TIMEOUT_MS, deadline - Date.now())),
        });
      } catch (err) {
        // Not granted yet, or a dial that did not finish (a loaded machine, a server reloading its
        // users): both are worth another try until the deadline.
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
  } finally {
    clearInterval(heartbeats);
  }
}
