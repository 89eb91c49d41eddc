/**
 * `amf agents forget` reaches every coordinator on the same NATS: the forgetting coordinator deletes
 * the agent's entry in the shared `amf_agents` bucket, and each coordinator watches that bucket for
 * deletes and drops the agent from its own registry — live or not, as the operator may throw out a
 * live impostor: its key is unbound and its enrollment dropped here too.
 */
import type { KV } from '@nats-io/kv';
import type { AgentRegistry } from '../registry/agentRegistry.js';
import type { LogFn } from '../log.js';

export interface AgentForgetWatch {
  stop(): void;
}

/** The agent id behind a bucket key (kvKey in fabric/jetstream.ts is base64url of the id). */
function agentIdOf(key: string): string {
  return Buffer.from(key, 'base64url').toString('utf8');
}

/** Watches the agents bucket for deletes (new ones only) and forgets those agents here too. */
export async function watchForgottenAgents(
  agents: KV,
  registry: AgentRegistry,
  log: LogFn,
): Promise<AgentForgetWatch> {
  const updates = await agents.watch({ include: 'updates', headers_only: true });
  void (async () => {
    for await (const entry of updates) {
      if (entry.operation !== 'DEL' && entry.operation !== 'PURGE') continue;
      const id = agentIdOf(entry.key);
      const agent = registry.get(id);
      if (!agent && registry.boundKey(id) === undefined) continue;
      // Forgotten also unbinds the id from its key here, so the agent may come back with a new one.
      registry.forget(id);
      log('info', 'agent forgotten by another coordinator', { agent_id: id });
    }
  })().catch((err: unknown) => {
    log('warn', 'the watch of forgotten agents stopped', { error: String(err) });
  });
  return { stop: () => updates.stop() };
}
