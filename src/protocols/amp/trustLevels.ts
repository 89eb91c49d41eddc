/**
 * AMP trust enforcement. A request's `trust.level` says what the receiver may do on the sender's
 * behalf; a `read-only` sender reaches only read-only capabilities. An agent marks capabilities
 * read-only in its agent card, in the `x-amf` block: `read_only: true` (every capability it serves)
 * or `read_only_capabilities: ["tag", ...]`. Because a mesh task for a tag can be claimed by any agent
 * serving it, a tag counts as read-only only when EVERY live agent serving it says so.
 */
import type { RegisteredAgent } from '../../registry/agentRegistry.js';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import type { AmpTrust } from './ampMessage.js';

/** True when `agent`'s card declares `tag` read-only. */
export function agentDeclaresReadOnly(agent: RegisteredAgent, tag: string): boolean {
  const ext = agent.card?.['x-amf'];
  if (typeof ext !== 'object' || ext === null) return false;
  const x = ext as { read_only?: unknown; read_only_capabilities?: unknown };
  if (x.read_only === true) return true;
  return Array.isArray(x.read_only_capabilities) && x.read_only_capabilities.includes(tag);
}

/** True when every live, non-draining agent serving `tag` declares it read-only (and one exists). */
export function isReadOnlyCapability(tag: string, registry: AgentDirectory): boolean {
  let serving = 0;
  for (const agent of registry.list()) {
    if (agent.status !== 'live' || agent.record.status === 'draining') continue;
    if (registry.isDisabled(agent.record.agent_id)) continue;
    if (!(agent.record.capability_tags ?? []).includes(tag)) continue;
    serving += 1;
    if (!agentDeclaresReadOnly(agent, tag)) return false;
  }
  return serving > 0;
}

/**
 * Checks a routed capability against the sender's trust: undefined when allowed, else the reason for
 * a `refused` / `trust_insufficient` answer. No `trust` block means the sender set no restriction;
 * `read-write` and `full` reach every capability (AMF has no capability above read-write).
 */
export function trustRefusal(
  trust: AmpTrust | undefined,
  tag: string,
  registry: AgentDirectory,
): string | undefined {
  if (!trust) return undefined;
  if (trust.allowlist && !trust.allowlist.includes(tag))
    return `capability "${tag}" is not in trust.allowlist (${trust.allowlist.slice(0, 10).join(', ')})`;
  if (trust.level === 'read-only' && !isReadOnlyCapability(tag, registry))
    return `capability "${tag}" is not read-only (no x-amf.read_only marking by every agent serving it), and trust.level is read-only`;
  return undefined;
}
