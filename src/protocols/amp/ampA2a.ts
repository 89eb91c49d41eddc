/**
 * AMP inside A2A: an AMP request travels in an A2A message as a data part (`{data: {amp: "1.0", ...}}`,
 * or `{kind: "data", data}` in A2A 0.3), as a text part whose text is the JSON of the request (the AMP
 * README's form), or in `message.metadata[AMP_EXTENSION_URI]`. The coordinator's A2A server is handed
 * {@link AMP_IN_A2A} as one of its extensions (by the composition root: adapters import no other
 * adapter) and asks it about every incoming message; a request found is routed by its intent.
 */
import type { TaskResult } from '../../coordinator/tasks/taskService.js';
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import { AMP_EXTENSION_URI, AMP_LIMITS, validateAmpMessage, type AmpValidation } from './ampMessage.js';
import { routeAmpMessage } from './ampRouting.js';
import { ampOutcome } from './ampService.js';
import { trustRefusal } from './trustLevels.js';

/** Largest text part parsed as a possible AMP request. */
const MAX_AMP_TEXT_BYTES = AMP_LIMITS.contextBytes + 16 * 1024;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function candidate(part: unknown): unknown {
  if (!isObject(part)) return undefined;
  if (isObject(part.data) && 'amp' in part.data) return part.data;
  if (typeof part.text === 'string') {
    const text = part.text.trim();
    if (!text.startsWith('{') || !text.includes('"amp"') || Buffer.byteLength(text) > MAX_AMP_TEXT_BYTES)
      return undefined;
    try {
      const value: unknown = JSON.parse(text);
      return isObject(value) && 'amp' in value ? value : undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * The AMP request carried by an A2A message (any protocol version): undefined when it carries none,
 * else the validation result (a typed request, or the AMP error code and message to answer with).
 */
export function extractAmpMessage(a2aMessage: unknown, now: number = Date.now()): AmpValidation | undefined {
  if (!isObject(a2aMessage)) return undefined;
  const metadata = a2aMessage.metadata;
  if (isObject(metadata) && isObject(metadata[AMP_EXTENSION_URI]))
    return validateAmpMessage(metadata[AMP_EXTENSION_URI], now);
  const parts = Array.isArray(a2aMessage.parts) ? a2aMessage.parts.slice(0, 64) : [];
  for (const part of parts) {
    const value = candidate(part);
    if (value !== undefined) return validateAmpMessage(value, now);
  }
  return undefined;
}

/** An AMP request carried in an A2A message, routed: what the A2A server needs to run and answer it. */
export interface CarriedAmpRoute {
  tag: string;
  text: string;
  data?: Record<string, unknown>;
  /** AMP's fields on the answer: the request it answers, status, confidence, uncertainty. */
  answer(result: Pick<TaskResult, 'confidence' | 'data'>): Record<string, unknown>;
}

/**
 * AMP as an A2A extension (the shape of protocols/a2a's A2aExtension): a carried request is checked,
 * routed by AMP's rules and held to its trust level; a refusal is the sentence the A2A error says.
 */
export const AMP_IN_A2A = {
  uri: AMP_EXTENSION_URI,
  name: 'amp',
  route(message: unknown, registry: AgentDirectory): CarriedAmpRoute | { refused: string } | undefined {
    const amp = extractAmpMessage(message);
    if (!amp) return undefined;
    if (!amp.ok) return { refused: `invalid AMP message (${amp.code}): ${amp.message}` };
    const routing = routeAmpMessage(amp.message, registry);
    if (!routing.ok) return { refused: `AMP ${routing.code}: ${routing.message}` };
    const refusal = trustRefusal(amp.message.trust, routing.tag, registry);
    if (refusal) return { refused: `AMP trust_insufficient: ${refusal}` };
    const { id, intent, context } = amp.message;
    return {
      tag: routing.tag,
      text: intent,
      ...(context ? { data: context } : {}),
      answer: (result) => ({ in_reply_to: id, ...ampOutcome(result) }),
    };
  },
} as const;
