/**
 * Which capability tag an A2A message goes to on the mesh, for AMF-aware and plain clients alike:
 * `metadata.tag` (on the message or the request), else a request of an A2A extension carried by the
 * message (AMP: its routing and trust rules, plugged in as an A2aExtension), else `metadata.intent`,
 * else the tag its conversation (`contextId`) went to before, else the skill whose words the
 * message's text matches (registry/intentRouter.ts), else the only capability the mesh serves, else
 * the configured default agent (`a2a.default_agent`). A message none of these places is refused
 * with an A2A error that lists the skills and says what to send.
 */
import { Message as WireMessage, type Message, type SendMessageRequest } from '@a2a-js/sdk';
import { RequestMalformedError } from '@a2a-js/sdk/errors';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import { isCapabilityTag } from '../../events/subjects.js';
import { namesAgent, routeIntent } from '../../registry/intentRouter.js';
import type { A2aExtension, ExtensionRoute } from './a2aExtension.js';
import { messageInput, type MessageInput } from './messageParts.js';

/** How a message was routed, when no extension carried it (then: the extension's name). */
export type RouteVia = 'metadata' | 'intent' | 'context' | 'skill' | 'only-capability' | 'default-agent';

/** What routing needs besides the message and the registry. */
export interface RoutingOptions {
  /** `a2a.default_agent`: a capability tag, or an agent's name or id (its first live tag). */
  defaultAgent?: string | null;
  /** The tag the conversation `contextId` went to last, when it is known. */
  contextTag?: (contextId: string) => string | undefined;
  /** Extensions whose requests a message may carry (AMP), tried in order after `metadata.tag`. */
  extensions?: readonly A2aExtension[];
}

/** The extension that routed a message, and how it answers. */
export interface RoutedExtension {
  uri: string;
  answer: ExtensionRoute['answer'];
}

/** A message routed to a tag, with the task text and input the mesh task gets. */
export interface A2aRoute extends MessageInput {
  tag: string;
  /** A {@link RouteVia}, or the name of the extension that carried the request. */
  via: string;
  /** The extension whose request the message carried (its answer gets the extension's fields). */
  extension?: RoutedExtension;
}

function metadataString(metadata: Record<string, unknown> | undefined, key: string): string | undefined {
  const value = metadata?.[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new RequestMalformedError(`metadata.${key} must be a string`);
  return value;
}

function servedTag(tag: string, registry: AgentDirectory): string {
  if (!isCapabilityTag(tag))
    throw new RequestMalformedError(
      `metadata.tag "${String(tag).slice(0, 80)}" is not a capability tag ([a-z0-9-]+)`,
    );
  if (!registry.servesTag(tag)) throw new RequestMalformedError(`no live agent serves capability "${tag}"`);
  return tag;
}

/** The live skills as a person reads them: `tag (description)`, at most 50. */
function skillList(registry: AgentDirectory): string {
  const live = [...registry.liveTags().keys()].sort();
  if (live.length === 0) return 'no agent is live in the mesh';
  const described = new Map<string, string>();
  for (const agent of registry.list()) {
    if (agent.status !== 'live') continue;
    const skills = (agent.card as { skills?: unknown } | undefined)?.skills;
    if (!Array.isArray(skills)) continue;
    for (const skill of skills as Array<Record<string, unknown>>)
      if (typeof skill.id === 'string' && typeof skill.description === 'string' && !described.has(skill.id))
        described.set(skill.id, skill.description.replace(/\s+/g, ' ').slice(0, 100));
  }
  const shown = live.slice(0, 50).map((tag) => (described.has(tag) ? `${tag} (${described.get(tag)})` : tag));
  return `skills: ${shown.join('; ')}${live.length > 50 ? `; and ${live.length - 50} more` : ''}`;
}

/** The live tag of the configured default agent, or a sentence saying why there is none. */
function defaultAgentTag(name: string, registry: AgentDirectory): { tag: string } | { why: string } {
  if (isCapabilityTag(name) && registry.servesTag(name)) return { tag: name };
  const agent = registry.list().find((a) => a.status === 'live' && namesAgent(a, name));
  const tag = agent?.record.capability_tags?.find((t) => registry.servesTag(t));
  return tag ? { tag } : { why: `the default agent "${name.slice(0, 80)}" (a2a.default_agent) is not live` };
}

function liveTagList(registry: AgentDirectory): string {
  const live = [...registry.liveTags().keys()].sort();
  return live.length === 0
    ? 'no agent is live in the mesh'
    : `live capabilities: ${live.slice(0, 50).join(', ')}`;
}

/** The route of the first extension whose request `message` carries; throws when it refuses. */
function routeByExtension(
  message: Message,
  registry: AgentDirectory,
  extensions: readonly A2aExtension[],
): A2aRoute | undefined {
  if (extensions.length === 0) return undefined;
  const json = WireMessage.toJSON(message);
  for (const extension of extensions) {
    const route = extension.route(json, registry);
    if (!route) continue;
    if ('refused' in route) throw new RequestMalformedError(route.refused);
    return {
      text: route.text,
      ...(route.data ? { data: route.data } : {}),
      tag: route.tag,
      via: extension.name,
      extension: { uri: extension.uri, answer: (result) => route.answer(result) },
    };
  }
  return undefined;
}

/** Routes a SendMessage request; throws RequestMalformedError when no capability fits. */
export function routeA2aMessage(
  request: SendMessageRequest,
  registry: AgentDirectory,
  options: RoutingOptions = {},
): A2aRoute {
  const message = request.message as Message;
  const tag = metadataString(message.metadata, 'tag') ?? metadataString(request.metadata, 'tag');
  if (tag !== undefined) return { ...messageInput(message), tag: servedTag(tag, registry), via: 'metadata' };

  const carried = routeByExtension(message, registry, options.extensions ?? []);
  if (carried) return carried;

  const input = messageInput(message);
  const intent = metadataString(message.metadata, 'intent') ?? metadataString(request.metadata, 'intent');
  if (intent !== undefined) {
    const route = routeIntent(intent.slice(0, 2000), registry);
    if (!route)
      throw new RequestMalformedError(
        `no live capability matches intent "${intent.slice(0, 80)}"; ${liveTagList(registry)}`,
      );
    return { ...input, tag: route.tag, via: 'intent' };
  }
  // A conversation stays with its agent: "and in euros?" has no words of its own to route by.
  const contextId = message.contextId;
  const earlier = contextId ? options.contextTag?.(contextId) : undefined;
  if (earlier !== undefined && registry.servesTag(earlier)) return { ...input, tag: earlier, via: 'context' };
  const bySkill = routeIntent(input.text.slice(0, 2000), registry);
  if (bySkill) return { ...input, tag: bySkill.tag, via: 'skill' };
  const live = [...registry.liveTags().keys()];
  if (live.length === 1) return { ...input, tag: live[0]!, via: 'only-capability' };
  const fallback = options.defaultAgent ? defaultAgentTag(options.defaultAgent, registry) : undefined;
  if (fallback && 'tag' in fallback) return { ...input, tag: fallback.tag, via: 'default-agent' };
  const why = fallback ? fallback.why : 'no default agent is configured (a2a.default_agent)';
  throw new RequestMalformedError(
    `cannot tell which agent this message is for: its words match no skill and ${why}; name a skill in message.metadata.tag, or say what you want done in its words; ${skillList(registry)}`,
  );
}
