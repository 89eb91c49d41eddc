/**
 * Where an AMP request goes: the capability its context names, a recipient in `to`, or the live tag
 * its intent matches (registry/intentRouter.ts). The same rules route AMP over HTTP (ampService.ts)
 * and AMP carried in A2A messages (ampA2a.ts).
 */
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import { intentWords, namesAgent, routeIntent, type IntentRoute } from '../../registry/intentRouter.js';
import { isCapabilityTag } from '../../events/subjects.js';
import type { AmpRequest } from './ampMessage.js';

/** How a message was routed (or why not). */
export type AmpRouting =
  | { ok: true; tag: string; via: 'context' | 'to' | 'intent'; route?: IntentRoute }
  | { ok: false; code: 'capability_mismatch' | 'intent_unclear'; message: string };

/**
 * Routes an AMP request: `context.capability` (an AMF addition) names the tag outright; a recipient
 * in `to` may name a tag (`calc`, `amf/calc`) or a live agent (whose tags then bound the choice);
 * otherwise the intent is matched against every live tag.
 */
export function routeAmpMessage(message: AmpRequest, registry: AgentDirectory): AmpRouting {
  const explicit = message.context?.capability;
  if (explicit !== undefined) {
    if (typeof explicit !== 'string' || !isCapabilityTag(explicit))
      return {
        ok: false,
        code: 'capability_mismatch',
        message: 'context.capability must be a capability tag',
      };
    if (!registry.servesTag(explicit))
      return {
        ok: false,
        code: 'capability_mismatch',
        message: `no live agent serves capability "${explicit}"`,
      };
    return { ok: true, tag: explicit, via: 'context' };
  }
  let onlyTags: Set<string> | undefined;
  for (const recipient of message.to) {
    const tag = recipient.toLowerCase().replace(/^amf\//, '');
    if (isCapabilityTag(tag) && registry.servesTag(tag)) return { ok: true, tag, via: 'to' };
    const agent = registry.list().find((a) => a.status === 'live' && namesAgent(a, recipient));
    if (agent) {
      onlyTags ??= new Set();
      for (const t of agent.record.capability_tags ?? []) if (registry.servesTag(t)) onlyTags.add(t);
    }
  }
  if (onlyTags && onlyTags.size === 1) return { ok: true, tag: [...onlyTags][0]!, via: 'to' };
  if (intentWords(message.intent).length === 0)
    return {
      ok: false,
      code: 'intent_unclear',
      message: 'the intent has no words to route by: say what you want done',
    };
  const route = routeIntent(message.intent, registry, onlyTags);
  if (route) return { ok: true, tag: route.tag, via: 'intent', route };
  const live = [...registry.liveTags().keys()].sort();
  return {
    ok: false,
    code: 'capability_mismatch',
    message:
      live.length === 0
        ? 'no live agent is in the mesh'
        : `no live capability matches the intent; live capabilities: ${live.slice(0, 50).join(', ')} (name one in context.capability)`,
  };
}
