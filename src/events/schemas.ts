/**
 * The AMF JSON schemas 1.1.0 as TypeScript objects, so the validator needs no JSON copy step at build
 * time. `schemas/*.json` are the published artefacts; a test keeps them identical to these objects.
 * What changed from 1.0.0, and why, is in docs/http-api.md ("Event schemas").
 */

import { AMF_EVENT_TYPES } from './eventTypes.js';

/**
 * RFC 3339 `date-time` as its ABNF says: `T` separator, seconds, a mandatory offset with a colon.
 * The ajv `date-time` format alone also accepts a space separator and `+0100`; the format still
 * runs beside this pattern to reject impossible dates such as month 13.
 */
const RFC3339_DATE_TIME =
  '^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$';

/** Semantic Versioning 2.0.0 pre-release and build suffixes, shared by the version patterns. */
const SEMVER_SUFFIX = '(-[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?(\\+[0-9A-Za-z-]+(\\.[0-9A-Za-z-]+)*)?';

/** Freezes a schema tree: the objects are shared by every importer, so one mutation would change them all. */
function deepFreeze<T extends object>(value: T): T {
  for (const child of Object.values(value)) {
    if (typeof child === 'object' && child !== null) deepFreeze(child as object);
  }
  return Object.freeze(value);
}

/** The CloudEvents Integer type is a signed 32-bit number. */
const CE_INTEGER_MIN = -2147483648;
const CE_INTEGER_MAX = 2147483647;

/** JSON Schema of the AMF event envelope 1.1.0 (CloudEvents 1.0, JSON format). */
export const EVENT_ENVELOPE_SCHEMA = deepFreeze({
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  $id: 'https://amf.spec/schemas/event-envelope/1.1.0',
  title: 'AMFEvent',
  description:
    'AMF event envelope 1.1.0: a CloudEvents 1.0 event in JSON format (structured mode), compatible with A2A Part.data and MS Fabric Eventstreams. `type` is one of the 15 AMF event types and doubles as the NATS subject, with one exception: a task announcement is published on the subject `amf.task.announce.<capability_tag>` (so that workers join per-tag queue groups) while its `type` stays `amf.task.announce`. Unknown CloudEvents extension attributes are accepted and ignored when their names match ^[a-z0-9]{1,20}$ and their values are CloudEvents primitives (string, boolean, 32-bit integer); the AMF extensions are typed. AMF events carry a JSON object in `data`: binary data (`data_base64`) is rejected. Readers of this schema accept any amfschemaversion 1.x.y.',
  type: 'object',
  required: [
    'specversion',
    'id',
    'source',
    'type',
    'time',
    'datacontenttype',
    'amfagentrole',
    'amfvisibility',
    'amfconfidence',
    'amfttl',
    'amfschemaversion',
    'data',
  ],
  properties: {
    specversion: { type: 'string', const: '1.0' },
    id: {
      type: 'string',
      minLength: 1,
      format: 'uuid',
      description: 'Unique message ID (CloudEvents: non-empty string; AMF: a UUID)',
    },
    source: {
      type: 'string',
      minLength: 1,
      format: 'uri-reference',
      description: 'SPIFFE ID or agent endpoint URI (CloudEvents: non-empty URI-reference)',
    },
    type: {
      type: 'string',
      description:
        'AMF event type; doubles as the NATS subject, except amf.task.announce, which is published on amf.task.announce.<capability_tag>',
      // eventTypes.ts is the one list of types; a copy, because deepFreeze would freeze the original.
      enum: [...AMF_EVENT_TYPES],
    },
    time: { $ref: '#/$defs/dateTime' },
    datacontenttype: { type: 'string', const: 'application/json' },
    dataschema: { type: 'string', minLength: 1, format: 'uri' },
    subject: { type: 'string', minLength: 1, description: 'task_id when relevant' },

    amftraceid: { $ref: '#/$defs/uuid' },
    amfparentid: { $ref: '#/$defs/uuid' },
    amftaskid: { $ref: '#/$defs/uuid' },
    amfagentrole: { type: 'string', enum: ['coordinator', 'specialist', 'watcher', 'connector'] },
    amfvisibility: { type: 'string', enum: ['local', 'mesh', 'public'] },
    amfconfidence: {
      type: 'string',
      pattern: '^(0(\\.[0-9]+)?|1(\\.0+)?)$',
      description: 'Confidence 0.0–1.0 as a string (CloudEvents has no float type)',
    },
    amfttl: {
      type: 'integer',
      minimum: 0,
      maximum: CE_INTEGER_MAX,
      description: 'Seconds until the event expires (a CloudEvents Integer)',
    },
    amfschemaversion: {
      type: 'string',
      pattern: `^1\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)${SEMVER_SUFFIX}$`,
      description:
        'SemVer of the envelope schema the sender wrote. Any 1.x.y is readable by this schema; another major version is a breaking change.',
    },
    amftrustdomain: { type: 'string', minLength: 1 },

    data: {
      type: 'object',
      required: ['payload', 'auth_context'],
      additionalProperties: false,
      properties: {
        payload: { type: 'object', description: 'Event-specific data' },
        auth_context: {
          type: 'object',
          description:
            'Who sent the event and under which authority. Closed (no unknown fields): an authority field a reader does not understand must fail validation rather than be ignored.',
          required: ['identity', 'trust_domain'],
          additionalProperties: false,
          properties: {
            identity: { type: 'string', minLength: 1, description: 'SPIFFE ID or DID of the sender' },
            trust_domain: { type: 'string', minLength: 1 },
            scopes: { type: 'array', items: { type: 'string' } },
            granted_by: {
              type: 'string',
              minLength: 1,
              description: 'Identity that granted the scopes; equals identity when self-issued',
            },
            delegation_chain: {
              type: 'array',
              items: { type: 'string', minLength: 1 },
              description:
                'Identities the authority was delegated through, root first; empty when self-issued',
            },
            issued_at: { $ref: '#/$defs/dateTime' },
            expires_at: { $ref: '#/$defs/dateTime' },
            svid_verified: {
              type: 'boolean',
              description:
                'True only when the identity was proven by a SPIFFE SVID; mesh and public visibility require it (LOCKED #3a)',
            },
          },
        },
        artifact_refs: { type: 'array', items: { type: 'string', format: 'uri' } },
        evidence_refs: { type: 'array', items: { type: 'string', format: 'uri' } },
      },
    },
    data_base64: {
      description:
        'Not supported: CloudEvents allows binary data here instead of `data`, but AMF events carry a JSON object in `data`.',
      not: {},
    },
  },
  patternProperties: {
    '^(?!data$)[a-z0-9]{1,20}$': {
      description:
        'Any other CloudEvents extension attribute: accepted and ignored when its value is a CloudEvents primitive. (`data` is excluded because it is not an attribute.)',
      type: ['string', 'integer', 'boolean'],
      minimum: CE_INTEGER_MIN,
      maximum: CE_INTEGER_MAX,
    },
  },
  additionalProperties: false,
  dependentSchemas: {
    data_base64: { not: { required: ['data'] } },
  },
  $defs: {
    dateTime: { type: 'string', format: 'date-time', pattern: RFC3339_DATE_TIME },
    uuid: { type: 'string', format: 'uuid' },
  },
} as const);

/** JSON Schema of the AMF agent record 1.1.0 (the mDNS advertisement, parsed from its TXT record). */
export const AGENT_RECORD_SCHEMA = deepFreeze({
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  $id: 'https://amf.spec/schemas/agent-record/1.1.0',
  title: 'AgentRecord',
  description:
    'Minimal agent advertisement published via mDNS/DNS-SD (_amf-agent._tcp.local). MUST be ≤512 bytes when serialized as a TXT record. Richer details are fetched from card_url on demand. Which protocols are admitted is policy (the watcher allowlist), not schema: this schema only checks their shape. When protocols_supported lists an MCP protocol, mcp_endpoint is required (LOCKED #1).',
  type: 'object',
  required: ['agent_id', 'endpoint', 'protocols_supported'],
  additionalProperties: false,
  properties: {
    agent_id: { type: 'string', minLength: 1, description: 'SPIFFE ID or W3C DID' },
    display_name: { type: 'string', maxLength: 64 },
    endpoint: { type: 'string', format: 'uri', description: 'Base URL for A2A/MCP endpoints' },
    protocols_supported: {
      type: 'array',
      minItems: 1,
      items: { type: 'string', pattern: '^(A2A|MCP|AMP)/[0-9A-Za-z.-]+$' },
      description: 'Protocol/version pairs, e.g. A2A/1.0, A2A/0.3, MCP/2025-11-25, MCP/2024-11-05, AMP/1.0',
    },
    capability_tags: {
      type: 'array',
      items: { type: 'string', pattern: '^[a-z0-9-]+$', maxLength: 64 },
      description:
        "Low-risk keywords only, e.g. ['code-exec', 'web-search', 'pdf-parse']. Each becomes a NATS subject token (LOCKED #17).",
    },
    trust_domain: { type: 'string', description: "'local', 'team', or 'public'" },
    visibility: { type: 'string', enum: ['local', 'mesh', 'public'], default: 'local' },
    subscription_topics: { type: 'array', items: { type: 'string' } },
    publish_topics: { type: 'array', items: { type: 'string' } },
    latency_class: { type: 'string', enum: ['realtime', 'fast', 'batch'] },
    cost_class: { type: 'string', enum: ['free', 'low', 'high'] },
    auth_requirements: { type: 'object' },
    version: { type: 'string', pattern: '^\\d+\\.\\d+\\.\\d+$' },
    status: { type: 'string', enum: ['active', 'degraded', 'draining', 'offline'], default: 'active' },
    card_url: {
      type: 'string',
      format: 'uri',
      description: 'Fetch full A2A agent card (/.well-known/agent-card.json)',
    },
    heartbeat_seconds: {
      type: 'integer',
      minimum: 1,
      maximum: 3600,
      description: 'Interval of amf.discovery.agent.heartbeat events; liveness is judged against it',
    },
    mcp_endpoint: {
      type: 'string',
      format: 'uri',
      description: 'MCP Streamable HTTP endpoint (TXT key `mcp`)',
    },
    tool_alias: {
      type: 'string',
      pattern: '^[A-Za-z0-9_.-]{1,64}$',
      description:
        'Short name that stands for agent_id in MCP tool names, which must match [A-Za-z0-9_.-]{1,64} on the wire (a SPIFFE ID or DID does not)',
    },
    nkey: {
      type: 'string',
      pattern: '^U[A-Z2-7]{55}$',
      description:
        "The agent's NATS nkey public key (TXT key `nk`): bound to agent_id at admission, its NATS user and the key its events are signed with",
    },
  },
  if: {
    required: ['protocols_supported'],
    properties: { protocols_supported: { type: 'array', contains: { type: 'string', pattern: '^MCP/' } } },
  },
  then: { required: ['mcp_endpoint'] },
} as const);
