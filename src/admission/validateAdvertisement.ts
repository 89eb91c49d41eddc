/**
 * Deterministic validation of a raw advertisement, the first gate of admission: size, charset,
 * required keys, tag syntax, protocol syntax, URL parsing, and docs/decisions.md #1 (`MCP/...` needs `mcp=`).
 * An mDNS advertisement may point only at the address its packet came from, with fixed paths
 * ({@link mdnsUrlRefusal}). A failure is denied at once with its own reason and no watcher is
 * started for it.
 */
import type { RawAdvertisement } from '../discovery/advertisement.js';
import { MAX_TXT_BYTES } from '../discovery/advertisement.js';
import type { AgentRecord } from '../events/agentRecord.js';
import { CAPABILITY_TAG_PATTERN } from '../events/subjects.js';
import { checkUrl, NetError } from '../net/guardedFetch.js';
import { sameHost } from '../net/hostRules.js';
import { isNkeyUser } from '../identity/nkeyPublic.js';

/** Stable reason codes of deterministic denials. */
export type ValidationReason =
  | 'txt_too_large'
  | 'invalid_utf8'
  | 'duplicate_key'
  | 'invalid_charset'
  | 'missing_key'
  | 'invalid_agent_id'
  | 'invalid_tag'
  | 'invalid_protocol'
  | 'mcp_url_required'
  | 'invalid_url'
  | 'card_url_refused'
  | 'mcp_url_refused'
  | 'endpoint_refused'
  | 'invalid_value';

export type AdvertisementCheck =
  { ok: true; record: AgentRecord } | { ok: false; reason: ValidationReason; message: string };

const PROTOCOL_PATTERN = /^(A2A|MCP|AMP)\/[0-9A-Za-z.-]{1,20}$/;
const AGENT_ID_PATTERN =
  /^(spiffe:\/\/[a-z0-9.-]+(\/[A-Za-z0-9._~%!$&'()*+,;=:@-]+)+|did:[a-z0-9]+:[A-Za-z0-9._:%-]+|urn:[A-Za-z0-9][A-Za-z0-9-]{0,31}:[A-Za-z0-9()+,\-.:=@;$_!*'%/?#]+)$/;
const TRUST_DOMAIN_PATTERN = /^[a-z0-9.-]{1,253}$/;
const SEMVER_PATTERN = /^\d{1,9}\.\d{1,9}\.\d{1,9}$/;
// Control characters, bidi overrides and zero-width characters have no business in a TXT value.
const BAD_CHARS =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ufffd]/;
const MAX_VALUE_LENGTH = 256;
const MAX_TAGS = 32;

function fail(reason: ValidationReason, message: string): AdvertisementCheck {
  return { ok: false, reason, message };
}

function splitList(value: string): string[] {
  return value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v.length > 0);
}

/** Parses an http(s) URL; anything else (other schemes, credentials in the URL) is refused. */
export function parseAgentUrl(value: string): URL | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username || url.password) return undefined;
  return url;
}

/**
 * Why an advertised `card=` URL can never be fetched, or undefined when it can: it must be http(s)
 * without credentials, never a link-local or cloud metadata address, and on exactly the endpoint's
 * host. These are the card fetch's own rules (net/guardedFetch.ts `checkUrl` with the same
 * options), applied up front so an advertisement that points the coordinator at a metadata
 * address or another host is denied deterministically instead of being scored and admitted.
 */
export function cardUrlRefusal(card: string, endpoint: URL): string | undefined {
  try {
    checkUrl(card, {
      what: `card "${card.slice(0, 80)}"`,
      host: endpoint.hostname,
      hostRole: 'the host of ep=',
      loopbackIsOneHost: false,
    });
    return undefined;
  } catch (err) {
    if (err instanceof NetError) return err.message;
    throw err;
  }
}

/** The only path an mDNS advertisement's card URL may have. */
export const MDNS_CARD_PATH = '/.well-known/agent-card.json';
/** The only path an mDNS advertisement's MCP URL may have. */
export const MDNS_MCP_PATH = '/mcp';

/**
 * Why the URLs of an mDNS advertisement are refused, or undefined when they are not. A multicast
 * packet can come from anyone on the LAN and says whatever its sender likes, so the URLs it gives —
 * which the coordinator fetches (the card), calls (MCP `initialize`) and would route to — may only
 * be on the address the packet came from: the endpoint's host is that address (a loopback endpoint
 * only from a loopback sender), and the card and MCP URLs are on it at the fixed paths
 * `/.well-known/agent-card.json` and `/mcp`, without query or fragment. Otherwise an advertisement
 * would make the coordinator a probe of any host, port and path (blind SSRF) or redirect another
 * agent's calls. (A NATS heartbeat comes from a proven sender and keeps the wider rules.)
 */
export function mdnsUrlRefusal(
  source: string,
  endpoint: URL,
  card: string | undefined,
  mcp: string | undefined,
): { reason: 'endpoint_refused' | 'card_url_refused' | 'mcp_url_refused'; message: string } | undefined {
  const from = `the address the advertisement came from (${source.slice(0, 64)})`;
  if (!sameHost(endpoint.hostname, source))
    return {
      reason: 'endpoint_refused',
      message: `ep "${endpoint.href.slice(0, 80)}" is not on ${from}: an mDNS advertisement may only name its own address`,
    };
  const fixed = (value: string, path: string, what: 'card' | 'mcp'): string | undefined => {
    const url = parseAgentUrl(value);
    if (!url) return `${what} "${value.slice(0, 80)}" is not an http(s) URL without credentials`;
    if (!sameHost(url.hostname, source)) return `${what} "${value.slice(0, 80)}" is not on ${from}`;
    if (url.pathname !== path || url.search !== '' || url.hash !== '')
      return `${what} "${value.slice(0, 80)}" must be at the path ${path} (no query or fragment) on the advertiser's own address`;
    return undefined;
  };
  const cardProblem = card === undefined ? undefined : fixed(card, MDNS_CARD_PATH, 'card');
  if (cardProblem) return { reason: 'card_url_refused', message: cardProblem };
  const mcpProblem = mcp === undefined ? undefined : fixed(mcp, MDNS_MCP_PATH, 'mcp');
  if (mcpProblem) return { reason: 'mcp_url_refused', message: mcpProblem };
  return undefined;
}

/** Checks a raw advertisement and maps it to an AgentRecord; never throws. */
export function validateAdvertisement(raw: RawAdvertisement): AdvertisementCheck {
  if (raw.txt_bytes > MAX_TXT_BYTES)
    return fail('txt_too_large', `TXT record is ${raw.txt_bytes} bytes; the limit is ${MAX_TXT_BYTES}`);
  if (raw.invalid_utf8) return fail('invalid_utf8', 'TXT record is not valid UTF-8');
  // RFC 6763 says the first occurrence wins; an advertiser sending two values for one key is
  // trying to show different readers different things, so it is refused outright.
  if (raw.duplicate_keys && raw.duplicate_keys.length > 0)
    return fail(
      'duplicate_key',
      `TXT key(s) ${raw.duplicate_keys.slice(0, 5).join(', ')} appear more than once with different cases or values`,
    );
  const txt = raw.txt;
  for (const [key, value] of Object.entries(txt)) {
    if (!/^[a-z0-9_-]{1,32}$/.test(key))
      return fail('invalid_charset', `TXT key "${key.slice(0, 40)}" is not [a-z0-9_-]`);
    if (value.length > MAX_VALUE_LENGTH)
      return fail('invalid_value', `TXT value of "${key}" is longer than ${MAX_VALUE_LENGTH}`);
    if (BAD_CHARS.test(value))
      return fail('invalid_charset', `TXT value of "${key}" contains control or invisible characters`);
  }
  for (const key of ['id', 'ep', 'proto'] as const) {
    if (!txt[key]) return fail('missing_key', `required TXT key "${key}" is missing`);
  }
  const id = txt.id!;
  if (!AGENT_ID_PATTERN.test(id))
    return fail('invalid_agent_id', `id "${id.slice(0, 80)}" is not a SPIFFE ID, DID or URN`);
  const endpoint = parseAgentUrl(txt.ep!);
  if (!endpoint)
    return fail('invalid_url', `ep "${txt.ep!.slice(0, 80)}" is not an http(s) URL without credentials`);
  const protocols = splitList(txt.proto!);
  if (protocols.length === 0) return fail('missing_key', 'proto lists no protocol');
  const badProtocol = protocols.find((p) => !PROTOCOL_PATTERN.test(p));
  if (badProtocol)
    return fail(
      'invalid_protocol',
      `protocol "${badProtocol.slice(0, 40)}" is not of the form A2A|MCP|AMP/<version>`,
    );
  const tags = txt.tags === undefined ? [] : splitList(txt.tags);
  if (tags.length > MAX_TAGS) return fail('invalid_tag', `more than ${MAX_TAGS} capability tags`);
  const badTag = tags.find((t) => !CAPABILITY_TAG_PATTERN.test(t));
  if (badTag !== undefined)
    return fail('invalid_tag', `capability tag "${badTag.slice(0, 40)}" does not match [a-z0-9-]+`);
  // docs/decisions.md #1: an MCP agent must say where its MCP endpoint is.
  if (protocols.some((p) => p.startsWith('MCP/'))) {
    if (!txt.mcp) return fail('mcp_url_required', 'proto includes MCP/ but the mcp= URL is missing');
    if (!parseAgentUrl(txt.mcp))
      return fail('invalid_url', `mcp "${txt.mcp.slice(0, 80)}" is not an http(s) URL`);
  } else if (txt.mcp !== undefined && !parseAgentUrl(txt.mcp)) {
    return fail('invalid_url', `mcp "${txt.mcp.slice(0, 80)}" is not an http(s) URL`);
  }
  if (txt.card !== undefined) {
    const refusal = cardUrlRefusal(txt.card, endpoint);
    if (refusal) return fail('card_url_refused', refusal);
  }
  if (raw.door === 'mdns') {
    const refusal = mdnsUrlRefusal(raw.source, endpoint, txt.card, txt.mcp);
    if (refusal) return fail(refusal.reason, refusal.message);
  }
  if (txt.td !== undefined && !TRUST_DOMAIN_PATTERN.test(txt.td))
    return fail('invalid_value', `td "${txt.td.slice(0, 40)}" is not a trust domain name`);
  if (txt.vis !== undefined && !['local', 'mesh', 'public'].includes(txt.vis))
    return fail('invalid_value', `vis must be local, mesh or public (got "${txt.vis.slice(0, 20)}")`);
  if (txt.status !== undefined && !['active', 'degraded', 'draining', 'offline'].includes(txt.status))
    return fail(
      'invalid_value',
      `status must be active, degraded, draining or offline (got "${txt.status.slice(0, 20)}")`,
    );
  if (txt.nk !== undefined && !isNkeyUser(txt.nk))
    return fail('invalid_value', `nk "${txt.nk.slice(0, 60)}" is not an nkey user public key`);
  if (txt.v !== undefined && !SEMVER_PATTERN.test(txt.v))
    return fail('invalid_value', `v "${txt.v.slice(0, 20)}" is not major.minor.patch`);
  const record: AgentRecord = {
    agent_id: id,
    endpoint: txt.ep!,
    protocols_supported: protocols,
    capability_tags: tags,
    trust_domain: txt.td ?? 'local',
    visibility: (txt.vis as AgentRecord['visibility']) ?? 'local',
    status: (txt.status as AgentRecord['status']) ?? 'active',
  };
  if (txt.v !== undefined) record.version = txt.v;
  if (txt.card !== undefined) record.card_url = txt.card;
  if (txt.mcp !== undefined) record.mcp_endpoint = txt.mcp;
  if (txt.nk !== undefined) record.nkey = txt.nk;
  if (raw.heartbeat_seconds !== undefined) record.heartbeat_seconds = raw.heartbeat_seconds;
  return { ok: true, record };
}
