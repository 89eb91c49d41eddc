import { describe, expect, it } from 'vitest';
import { AGENT_STATUSES, type AgentRecord } from '../../src/events/agentRecord.js';
import { AGENT_RECORD_SCHEMA } from '../../src/events/schemas.js';
import { validateAgentRecord } from '../../src/events/validateEvent.js';

function minimal(): Record<string, unknown> {
  return {
    agent_id: 'spiffe://local/specialist/3b1f',
    endpoint: 'http://127.0.0.1:8766',
    protocols_supported: ['A2A/1.0'],
  };
}

function full(): AgentRecord {
  return {
    agent_id: 'did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK',
    display_name: 'PDF parser',
    endpoint: 'http://127.0.0.1:8766',
    protocols_supported: ['A2A/1.0', 'A2A/0.3', 'MCP/2025-11-25', 'AMP/1.0'],
    capability_tags: ['pdf-parse', 'ocr2'],
    trust_domain: 'local',
    visibility: 'mesh',
    subscription_topics: ['amf.task.announce.pdf-parse'],
    publish_topics: ['amf.result.final'],
    latency_class: 'fast',
    cost_class: 'free',
    auth_requirements: { bearer: false },
    version: '1.4.2',
    status: 'degraded',
    card_url: 'http://127.0.0.1:8766/.well-known/agent-card.json',
    heartbeat_seconds: 30,
    mcp_endpoint: 'http://127.0.0.1:8766/mcp',
    tool_alias: 'pdf_parser.v1',
    nkey: 'UAIE5CHPS6IRFQEFOOWUELY2TWSTX5G5CURAC4JOWMZIGYPEVADU5XHP',
  };
}

function errorsOf(record: Record<string, unknown>): string[] {
  const result = validateAgentRecord(record);
  if (result.ok) throw new Error('expected the record to be invalid');
  return result.errors;
}

function withField(key: string, value: unknown): Record<string, unknown> {
  return { ...minimal(), [key]: value };
}

describe('validateAgentRecord', () => {
  it('accepts a minimal record', () => {
    const record = minimal();
    expect(validateAgentRecord(record)).toEqual({ ok: true, value: record });
  });

  it('accepts a record with every field', () => {
    expect(validateAgentRecord(full()).ok).toBe(true);
  });

  it('the AgentRecord interface names exactly the schema properties', () => {
    // A key missing from or added to the interface fails to compile here.
    const keys: Record<keyof AgentRecord, true> = {
      agent_id: true,
      display_name: true,
      endpoint: true,
      protocols_supported: true,
      capability_tags: true,
      trust_domain: true,
      visibility: true,
      subscription_topics: true,
      publish_topics: true,
      latency_class: true,
      cost_class: true,
      auth_requirements: true,
      version: true,
      status: true,
      card_url: true,
      heartbeat_seconds: true,
      mcp_endpoint: true,
      tool_alias: true,
      nkey: true,
    };
    expect(Object.keys(keys).sort()).toEqual(Object.keys(AGENT_RECORD_SCHEMA.properties).sort());
    expect(Object.keys(full()).sort()).toEqual(Object.keys(keys).sort());
  });

  it('AGENT_STATUSES is the schema status enum (SPEC degraded + schema draining)', () => {
    expect([...AGENT_STATUSES]).toEqual([...AGENT_RECORD_SCHEMA.properties.status.enum]);
  });

  it.each(AGENT_STATUSES)('accepts status %s', (status) => {
    expect(validateAgentRecord(withField('status', status)).ok).toBe(true);
  });

  it.each(['A2A/1.0', 'A2A/0.3', 'AMP/1.0', 'A2A/1.0.1-beta'])('accepts protocol %s', (protocol) => {
    expect(validateAgentRecord(withField('protocols_supported', [protocol])).ok).toBe(true);
  });

  it.each(['MCP/2024-11-05', 'MCP/2025-11-25'])('accepts protocol %s with an mcp_endpoint', (protocol) => {
    const record = {
      ...withField('protocols_supported', [protocol]),
      mcp_endpoint: 'http://127.0.0.1:8001/mcp',
    };
    expect(validateAgentRecord(record).ok).toBe(true);
  });

  it('requires mcp_endpoint when an MCP protocol is advertised (LOCKED #1)', () => {
    expect(errorsOf(withField('protocols_supported', ['A2A/1.0', 'MCP/2024-11-05']))).toEqual([
      "/: must have required property 'mcp_endpoint' (protocols_supported lists an MCP protocol, LOCKED #1)",
    ]);
  });

  const bad: Array<[string, Record<string, unknown>, string]> = [
    [
      'missing agent_id',
      (({ agent_id: _, ...rest }) => rest)(minimal()),
      "/: must have required property 'agent_id'",
    ],
    ['empty agent_id', withField('agent_id', ''), '/agent_id: must NOT have fewer than 1 characters'],
    [
      'missing endpoint',
      (({ endpoint: _, ...rest }) => rest)(minimal()),
      "/: must have required property 'endpoint'",
    ],
    ['endpoint not a URI', withField('endpoint', 'localhost 8766'), '/endpoint: must match format "uri"'],
    [
      'no protocols',
      withField('protocols_supported', []),
      '/protocols_supported: must NOT have fewer than 1 items',
    ],
    [
      'lowercase protocol',
      withField('protocols_supported', ['a2a/1.0']),
      '/protocols_supported/0: must match pattern',
    ],
    [
      'unknown protocol',
      withField('protocols_supported', ['HTTP/1.1']),
      '/protocols_supported/0: must match pattern',
    ],
    [
      'protocol without version',
      withField('protocols_supported', ['MCP']),
      '/protocols_supported/0: must match pattern',
    ],
    [
      'protocol with a space',
      withField('protocols_supported', ['A2A/1 0']),
      '/protocols_supported/0: must match pattern',
    ],
    [
      'protocols a string',
      withField('protocols_supported', 'A2A/1.0'),
      '/protocols_supported: must be array',
    ],
    [
      'status busy',
      withField('status', 'busy'),
      '/status: must be one of "active", "degraded", "draining", "offline"',
    ],
    [
      'uppercase tag',
      withField('capability_tags', ['Code']),
      '/capability_tags/0: must match pattern "^[a-z0-9-]+$"',
    ],
    ['tag with a dot', withField('capability_tags', ['a.b']), '/capability_tags/0: must match pattern'],
    ['tag wildcard', withField('capability_tags', ['*']), '/capability_tags/0: must match pattern'],
    ['empty tag', withField('capability_tags', ['']), '/capability_tags/0: must match pattern'],
    [
      'tag too long',
      withField('capability_tags', ['a'.repeat(65)]),
      '/capability_tags/0: must NOT have more than 64 characters',
    ],
    ['heartbeat 0', withField('heartbeat_seconds', 0), '/heartbeat_seconds: must be >= 1'],
    ['heartbeat over an hour', withField('heartbeat_seconds', 3601), '/heartbeat_seconds: must be <= 3600'],
    ['heartbeat fractional', withField('heartbeat_seconds', 2.5), '/heartbeat_seconds: must be integer'],
    ['mcp_endpoint not a URI', withField('mcp_endpoint', '/mcp'), '/mcp_endpoint: must match format "uri"'],
    ['tool_alias with a space', withField('tool_alias', 'my agent'), '/tool_alias: must match pattern'],
    ['tool_alias with a slash', withField('tool_alias', 'a/b'), '/tool_alias: must match pattern'],
    ['tool_alias too long', withField('tool_alias', 'a'.repeat(65)), '/tool_alias: must match pattern'],
    [
      'visibility team',
      withField('visibility', 'team'),
      '/visibility: must be one of "local", "mesh", "public"',
    ],
    ['version not semver', withField('version', 'v1'), '/version: must match pattern'],
    [
      'display_name too long',
      withField('display_name', 'x'.repeat(65)),
      '/display_name: must NOT have more than 64 characters',
    ],
    ['unknown property', withField('nats_url', 'nats://x'), '/nats_url: is not an allowed property here'],
  ];

  it.each(bad)('refuses %s', (_label, record, fragment) => {
    const errors = errorsOf(record);
    expect(
      errors.some((error) => error.includes(fragment)),
      `errors: ${JSON.stringify(errors)}`,
    ).toBe(true);
  });

  it('refuses what is not an object', () => {
    expect(validateAgentRecord('id=x')).toEqual({ ok: false, errors: ['/: must be object'] });
  });
});
