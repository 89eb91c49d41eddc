/**
 * Where an AMF agent card carries its mesh facts (agent id, trust domain, role, the coordinator's
 * NATS URL, MCP endpoint, tool alias, read-only marks). A2A 1.0 cards are strict: unknown top-level
 * fields fail the schema, so AMF states these as the `params` of an A2A extension in
 * `capabilities.extensions`. Cards of older AMF agents (and the legacy `/.well-known/agent.json`
 * view) carry the same object as a top-level `x-amf`; readers accept both.
 */

/** The A2A extension whose params are AMF's mesh facts (not required: plain A2A clients ignore it). */
export const AMF_CARD_EXTENSION_URI = 'urn:amf:a2a-extension:mesh:1';

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The mesh facts of `card`: the AMF extension's params, else a top-level `x-amf`, else undefined. */
export function amfCardBlock(card: unknown): Record<string, unknown> | undefined {
  if (!isObject(card)) return undefined;
  const capabilities = card.capabilities;
  const extensions = isObject(capabilities) ? capabilities.extensions : undefined;
  if (Array.isArray(extensions))
    for (const ext of extensions as unknown[])
      if (isObject(ext) && ext.uri === AMF_CARD_EXTENSION_URI && isObject(ext.params)) return ext.params;
  return isObject(card['x-amf']) ? card['x-amf'] : undefined;
}

/**
 * `card` with its mesh facts also at the top-level `x-amf` (the shape AMF's own readers use), so a
 * card fetched from a 1.0 agent and one from an older agent are read the same way.
 */
export function withAmfBlock(card: Record<string, unknown>): Record<string, unknown> {
  const block = amfCardBlock(card);
  return block && card['x-amf'] === undefined ? { ...card, 'x-amf': block } : card;
}
