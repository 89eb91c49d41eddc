/**
 * Which capability tag an A2A message goes to on the mesh: `metadata.tag` (on the message or the
 * request), else an AMP request carried by the message (its routing and trust rules, from
 * src/protocols/amp), else `metadata.intent`, else the skill whose name and description match the
 * message text, else the only capability the mesh serves. Errors are A2A errors that say what to send.
 */
import { Message as WireMessage, type Message, type SendMessageRequest } from '@a2a-js/sdk';
import { RequestMalformedError } from '@a2a-js/sdk/errors';
import type { AgentRegistry } from '../../registry/agentRegistry.js';
import { isCapabilityTag } from '../../events/subjects.js';
import { extractAmpMessage } from '../amp/ampA2a.js';
import type { AmpRequest } from '../amp/ampMessage.js';
import { routeAmpMessage, routeIntent } from '../amp/intentRouter.js';
import { trustRefusal } from '../amp/trustLevels.js';
import { messageInput, type MessageInput } from './messageParts.js';

export type RouteVia = 'metadata' | 'amp' | 'intent' | 'skill' | 'only-capability';

/** A message routed to a tag, with the task text and input the mesh task gets. */
export interface A2aRoute extends MessageInput {
  tag: string;
  via: RouteVia;
  /** The AMP request when the message carried one (its answer gets AMP fields). */
  amp?: AmpRequest;
}

function metadataString(metadata: Record<string, unknown> | undefined, key: string): string | undefined {
  const value = metadata?.[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new RequestMalformedError(`metadata.${key} must be a string`);
  return value;
}

function servedTag(tag: string, registry: AgentRegistry): string {
  if (!isCapabilityTag(tag))
    throw new RequestMalformedError(
      `metadata.tag "${String(tag).slice(0, 80)}" is not a capability tag ([a-z0-9-]+)`,
    );
  if (!registry.servesTag(tag)) throw new RequestMalformedError(`no live agent serves capability "${tag}"`);
  return tag;
}

function liveTagList(registry: AgentRegistry): string {
  const live = [...registry.liveTags().keys()].sort();
  return live.length === 0
    ? 'no agent is live in the mesh'
    : `live capabilities: ${live.slice(0, 50).join(', ')}`;
}

/** Routes a SendMessage request; throws RequestMalformedError when no capability fits. */
export function routeA2aMessage(request: SendMessageRequest, registry: AgentRegistry): A2aRoute {
  const message = request.message as Message;
  const tag = metadataString(message.metadata, 'tag') ?? metadataString(request.metadata, 'tag');
  if (tag !== undefined) return { ...messageInput(message), tag: servedTag(tag, registry), via: 'metadata' };

  const amp = extractAmpMessage(WireMessage.toJSON(message));
  if (amp && !amp.ok) throw new RequestMalformedError(`invalid AMP message (${amp.code}): ${amp.message}`);
  if (amp?.ok) {
    const routing = routeAmpMessage(amp.message, registry);
    if (!routing.ok) throw new RequestMalformedError(`AMP ${routing.code}: ${routing.message}`);
    const refusal = trustRefusal(amp.message.trust, routing.tag, registry);
    if (refusal) throw new RequestMalformedError(`AMP trust_insufficient: ${refusal}`);
    const context = amp.message.context;
    return {
      text: amp.message.intent,
      ...(context ? { data: context } : {}),
      tag: routing.tag,
      via: 'amp',
      amp: amp.message,
    };
  }

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
  const bySkill = routeIntent(input.text.slice(0, 2000), registry);
  if (bySkill) return { ...input, tag: bySkill.tag, via: 'skill' };
  const live = [...registry.liveTags().keys()];
  if (live.length === 1) return { ...input, tag: live[0]!, via: 'only-capability' };
  throw new RequestMalformedError(
    `cannot tell which capability this message is for: set message.metadata.tag; ${liveTagList(registry)}`,
  );
}
