/**
 * Resource subscriptions through the federation: sessions subscribe to federated URIs, the
 * coordinator subscribes once per agent URI (reference-counted over sessions) on its shared client
 * and unsubscribes when the last session lets go. The agent's `notifications/resources/updated`
 * reach each subscribed session under the URI that session used.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';

/** Most subscriptions one session may hold. */
export const MAX_SUBSCRIPTIONS_PER_SESSION = 256;

/** Shared agent-side subscriptions, counted. */
export class AgentSubscriptions {
  private readonly counts = new Map<string, number>();

  private static key(agentId: string, uri: string): string {
    return `${agentId}\0${uri}`;
  }

  /** Subscribes at the agent unless some session already holds this URI there. */
  async acquire(agentId: string, uri: string, client: Client): Promise<void> {
    const key = AgentSubscriptions.key(agentId, uri);
    const n = this.counts.get(key) ?? 0;
    if (n === 0) await client.subscribeResource({ uri });
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** Drops one hold; the last one unsubscribes at the agent (best effort). */
  release(agentId: string, uri: string, client: (agentId: string) => Promise<Client>): void {
    const key = AgentSubscriptions.key(agentId, uri);
    const n = (this.counts.get(key) ?? 0) - 1;
    if (n > 0) {
      this.counts.set(key, n);
      return;
    }
    this.counts.delete(key);
    void client(agentId)
      .then((c) => c.unsubscribeResource({ uri }))
      .catch(() => undefined);
  }
}

/** One session's subscriptions: federated URI → agent and agent URI. */
export class SessionSubscriptions {
  readonly byUri = new Map<string, { agentId: string; uri: string }>();

  /** The federated URIs of this session that stand for `uri` at `agentId`. */
  federatedUris(agentId: string, uri: string): string[] {
    const out: string[] = [];
    for (const [federated, t] of this.byUri) if (t.agentId === agentId && t.uri === uri) out.push(federated);
    return out;
  }
}
