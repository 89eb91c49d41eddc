/**
 * The coordinator's `/.well-known/agent.json`: ONE document read by legacy A2A clients (the v0.2 card
 * path) and by AMP clients (the AMP manifest path). It is the coordinator's A2A card with the AMP
 * manifest fields merged in. The one key both specs claim is `capabilities`: A2A needs an object
 * (strict readers reject anything else), AMP a list of strings. The A2A object wins; the AMP strings
 * are in `amp_capabilities` and in the AMP extension's `params.capabilities`, and every live tag is
 * also an A2A skill.
 */
import type { AgentDirectory } from '../../registry/agentDirectory.js';
import { AMP_EXTENSION_URI, AMP_VERSION, MESSAGE_TYPES, TRUST_LEVELS } from './ampMessage.js';

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The AMP extension declaration for an A2A card's `capabilities.extensions`. */
export function ampExtension(baseUrl: string, capabilities: string[]): Record<string, unknown> {
  return {
    uri: AMP_EXTENSION_URI,
    description:
      'AMP v1.0-draft: intent-first messages with context, trust levels, confidence and uncertainty. Send an AMP request as a data part or to endpoints.message.',
    required: false,
    params: { version: AMP_VERSION, message_endpoint: `${baseUrl}/api/amp/message`, capabilities },
  };
}

/** Merges the AMP manifest fields into the coordinator's A2A `card`. */
export function ampManifest(
  card: Record<string, unknown>,
  baseUrl: string,
  registry: AgentDirectory,
  selfId: string,
): Record<string, unknown> {
  const tags = [...registry.liveTags().keys()].sort();
  const a2aCapabilities = isObject(card.capabilities) ? card.capabilities : {};
  const extensions = Array.isArray(a2aCapabilities.extensions) ? a2aCapabilities.extensions : [];
  const declared = extensions.some((e) => isObject(e) && e.uri === AMP_EXTENSION_URI);
  return {
    ...card,
    capabilities: {
      ...a2aCapabilities,
      extensions: declared ? extensions : [...extensions, ampExtension(baseUrl, tags)],
    },
    amp: AMP_VERSION,
    id: selfId,
    protocol: 'amp/1.0',
    amp_capabilities: tags,
    accepts: [...MESSAGE_TYPES],
    trust_tiers: [...TRUST_LEVELS],
    endpoints: {
      message: `${baseUrl}/api/amp/message`,
      discover: `${baseUrl}/api/amp/discover`,
      capabilities: `${baseUrl}/.well-known/agent-card.json`,
    },
    a2a: { agent_card: `${baseUrl}/.well-known/agent-card.json`, jsonrpc: `${baseUrl}/a2a` },
    updated_at: new Date().toISOString(),
  };
}
