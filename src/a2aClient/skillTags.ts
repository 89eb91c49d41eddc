/**
 * Capability tags for a bridged agent, from its card's skills. Remote skill ids and tags are free
 * text ("Weather Forecast", "summarize_v2"); AMF tags are `[a-z0-9-]{1,64}` and travel in NATS
 * subjects, so each is folded into that alphabet. Each mesh tag remembers the skill it came from,
 * so a task can name the remote skill back.
 */
import type { AgentSkill } from '@a2a-js/sdk';
import { isCapabilityTag } from '../events/subjects.js';

/** At most this many tags per bridged agent: a card with hundreds of skills must not flood the mesh. */
export const MAX_BRIDGE_TAGS = 32;

/** Folds free text into a capability tag, or undefined when nothing usable is left. */
export function toCapabilityTag(value: string): string | undefined {
  const tag = value
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 64)
    .replace(/-+$/, '');
  return isCapabilityTag(tag) ? tag : undefined;
}

/** Mesh tag → the remote skill id it stands for (absent for the agent's own name tag). */
export type TagMap = Map<string, string | undefined>;

/**
 * The tags a bridged agent serves: its configured name first (so it can always be addressed
 * directly), then each skill's id and tags in card order, folded, deduplicated, bounded.
 */
export function bridgeTags(agentName: string, skills: readonly AgentSkill[]): TagMap {
  const tags: TagMap = new Map();
  const add = (value: string, skillId: string | undefined) => {
    const tag = toCapabilityTag(value);
    if (tag && !tags.has(tag) && tags.size < MAX_BRIDGE_TAGS) tags.set(tag, skillId);
  };
  add(agentName, undefined);
  for (const skill of skills) {
    add(skill.id, skill.id);
    for (const t of Array.isArray(skill.tags) ? skill.tags : []) if (typeof t === 'string') add(t, skill.id);
  }
  return tags;
}
