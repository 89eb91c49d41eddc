/**
 * Intent → capability routing. Capabilities are free text meant for semantic matching (AMP spec §7,
 * A2A skills); the mesh dispatches by capability tag. This router scores the live tags of the
 * registry against the words of an intent: the tag itself, then the skills (name, description, tags,
 * examples) of the cards of the agents serving it. Deterministic and explainable (no model call): the
 * route says which words matched, so a caller can see why a message went where it did. The protocol
 * adapters (AMP, A2A, Fabric) share it, so it sits with the registry it reads.
 */
import type { RegisteredAgent } from './agentRegistry.js';
import type { AgentDirectory } from './agentDirectory.js';

/** Where an intent goes. */
export interface IntentRoute {
  tag: string;
  score: number;
  /** Intent words that matched the tag or its skills. */
  matched: string[];
  /** Other tags that scored, best first. */
  alternatives: string[];
}

// Words that say nothing about a capability.
const STOPWORDS = new Set(
  (
    'a an and are as at be but by can could do does for from get give have help how i in into is it ' +
    'its me my of on or our please should so some than that the their them then there these this to ' +
    'us using want was we what when where which who why will with would you your about find agent ' +
    'agents make need tell show'
  ).split(' '),
);
const MIN_SCORE = 3;

/** Lower-case word tokens of `text`, without stopwords. */
export function intentWords(text: string): string[] {
  return (text.toLowerCase().match(/[a-z0-9]+/g) ?? []).filter((w) => w.length >= 2 && !STOPWORDS.has(w));
}

/** A crude stem so "summaries"/"summary" and "calculates"/"calculate" meet. */
function stem(word: string): string {
  return word
    .replace(/(ies|es|s|ing|ed)$/, '')
    .replace(/[ey]$/, '')
    .slice(0, 12);
}

function cardSkills(agent: RegisteredAgent, tag: string): string[] {
  const skills = agent.card?.skills;
  if (!Array.isArray(skills)) return [];
  const texts: string[] = [];
  for (const s of skills.slice(0, 64)) {
    if (typeof s !== 'object' || s === null) continue;
    const skill = s as Record<string, unknown>;
    const tags = Array.isArray(skill.tags) ? skill.tags : [];
    if (skill.id !== tag && !tags.includes(tag)) continue;
    for (const v of [
      skill.name,
      skill.description,
      ...tags,
      ...(Array.isArray(skill.examples) ? skill.examples : []),
    ])
      if (typeof v === 'string') texts.push(v.slice(0, 2000));
  }
  return texts;
}

/** Words sharing a long common start ("summary"/"summarize"). */
function sharedStem(a: string, b: string): boolean {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n >= 5 && n >= 0.7 * Math.min(a.length, b.length);
}

/** The live agents serving each live tag. */
function agentsByTag(registry: AgentDirectory): Map<string, RegisteredAgent[]> {
  const byTag = new Map<string, RegisteredAgent[]>();
  for (const tag of registry.liveTags().keys()) byTag.set(tag, []);
  for (const agent of registry.list()) {
    if (agent.status !== 'live' || agent.record.status === 'draining') continue;
    if (registry.isDisabled(agent.record.agent_id)) continue;
    for (const tag of agent.record.capability_tags ?? []) byTag.get(tag)?.push(agent);
  }
  return byTag;
}

function scoreTag(
  tag: string,
  agents: RegisteredAgent[],
  words: string[],
  text: string,
): { score: number; matched: Set<string> } {
  const matched = new Set<string>();
  let score = 0;
  const tagWords = tag.split('-').filter((w) => w.length > 0);
  if (new RegExp(`(^|[^a-z0-9])${tagWords.join('[\\s_-]+')}($|[^a-z0-9])`).test(text)) {
    score += 10;
    matched.add(tag);
  }
  for (const tw of tagWords) {
    for (const w of words) {
      if (w === tw) continue; // counted by the phrase match above when the tag is one word
      if (tw.length >= 3 && w.length >= 4 && (w.startsWith(tw) || tw.startsWith(w) || sharedStem(w, tw))) {
        score += 3;
        matched.add(w);
      } else if (stem(w) === stem(tw) && w.length >= 3) {
        score += 4;
        matched.add(w);
      }
    }
  }
  const described = new Set<string>();
  for (const agent of agents) {
    for (const t of cardSkills(agent, tag)) for (const w of intentWords(t)) described.add(stem(w));
    if (agent.record.display_name)
      for (const w of intentWords(agent.record.display_name)) described.add(stem(w));
  }
  let fromSkills = 0;
  for (const w of new Set(words)) {
    if (w.length < 4 || !described.has(stem(w))) continue;
    fromSkills += 1;
    matched.add(w);
  }
  // Two skill words together are enough to route; one alone is not.
  score += 2 * Math.min(fromSkills, 5);
  return { score, matched };
}

/**
 * Picks the live capability tag that best fits `intent`, or undefined when none scores. Ties go to
 * the tag more live agents serve, then to the alphabetically first, so routing is stable.
 */
export function routeIntent(
  intent: string,
  registry: AgentDirectory,
  onlyTags?: ReadonlySet<string>,
): IntentRoute | undefined {
  const text = intent.toLowerCase();
  const words = intentWords(text);
  if (words.length === 0) return undefined;
  const byTag = agentsByTag(registry);
  const scored: Array<{ tag: string; score: number; matched: Set<string>; agents: number }> = [];
  for (const [tag, agents] of byTag) {
    if (onlyTags && !onlyTags.has(tag)) continue;
    const { score, matched } = scoreTag(tag, agents, words, text);
    if (score >= MIN_SCORE) scored.push({ tag, score, matched, agents: agents.length });
  }
  scored.sort((a, b) => b.score - a.score || b.agents - a.agents || a.tag.localeCompare(b.tag));
  const best = scored[0];
  if (!best) return undefined;
  return {
    tag: best.tag,
    score: best.score,
    matched: [...best.matched],
    alternatives: scored.slice(1, 5).map((s) => s.tag),
  };
}

/** True when `id` names `agent` (its id, display name or the last segment of its id). */
export function namesAgent(agent: RegisteredAgent, id: string): boolean {
  const lower = id.toLowerCase();
  const agentId = agent.record.agent_id.toLowerCase();
  return (
    agentId === lower ||
    agent.record.display_name?.toLowerCase() === lower ||
    agentId.replace(/\/+$/, '').split('/').pop() === lower
  );
}
