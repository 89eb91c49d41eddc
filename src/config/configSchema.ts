/**
 * The JSON schema (draft-07, as ajv compiles it) of the AMF configuration file `amf.yaml`.
 *
 * Every object is closed (`additionalProperties: false`) so a misspelt key is reported instead of
 * silently ignored. Sections are optional: a file holds only what it changes, and the built-in
 * defaults fill the rest. Each leaf carries `x-expected`, the phrase used in error messages
 * ("must be <x-expected>"), so messages say what was expected in words rather than in schema terms;
 * `x-secret` marks values that must never be echoed back in an error; `x-when` names the condition
 * under which a conditional `required` applies ("is required when <x-when>").
 */

/** A schema node, loosely typed: enough for the loader to walk it (coercion, key suggestions). */
export interface SchemaNode {
  type?: string | readonly string[];
  properties?: Readonly<Record<string, SchemaNode>>;
  items?: SchemaNode;
  'x-expected'?: string;
  'x-secret'?: boolean;
  'x-when'?: string;
  [keyword: string]: unknown;
}

/** The keywords this schema adds to JSON schema; they only annotate (ajv registers them as a vocabulary). */
export const SCHEMA_ANNOTATIONS = ['x-expected', 'x-secret', 'x-when'] as const;

// Port 0 means "any free port" (the contract allows it), so the range starts at 0.
const port = (): SchemaNode => ({
  type: 'integer',
  minimum: 0,
  maximum: 65535,
  'x-expected': 'an integer between 0 and 65535',
});

const positiveSeconds = (max: number): SchemaNode => ({
  type: 'number',
  exclusiveMinimum: 0,
  maximum: max,
  'x-expected': `a number of seconds greater than 0 and at most ${max}`,
});

const intRange = (min: number, max: number, unit = 'an integer'): SchemaNode => ({
  type: 'integer',
  minimum: min,
  maximum: max,
  'x-expected': `${unit} between ${min} and ${max}`,
});

const nonEmptyString = (what = 'a non-empty string'): SchemaNode => ({
  type: 'string',
  minLength: 1,
  maxLength: 4096,
  'x-expected': what,
});

const nullable = (node: SchemaNode): SchemaNode => ({
  ...node,
  type: [node.type as string, 'null'],
  'x-expected': `${node['x-expected'] ?? 'a value'}, or null`,
});

const boolean = (): SchemaNode => ({ type: 'boolean', 'x-expected': 'true or false' });

// http(s) URLs only: these are where AMF itself sends HTTP requests.
const HTTP_URL = '^https?://[^\\s/?#]+([/?#]\\S*)?$';
const httpUrl = (): SchemaNode => ({
  type: 'string',
  pattern: HTTP_URL,
  maxLength: 2048,
  'x-expected': 'an http:// or https:// URL',
});

// NATS accepts a comma-separated server list; each entry may omit the scheme (host:port).
const NATS_URL = '^((nats|tls|ws|wss)://)?[^\\s,/]+(,((nats|tls|ws|wss)://)?[^\\s,/]+)*$';

// Names that travel in NATS subjects, MCP tool names and URLs: keep them to one safe token.
const NAME = '^[a-z0-9_-]+$';
const nameNode = (what: string): SchemaNode => ({
  type: 'string',
  pattern: NAME,
  minLength: 1,
  maxLength: 64,
  'x-expected': `a ${what} name of 1-64 characters from a-z, 0-9, "_" and "-"`,
});

const stringList = (item: SchemaNode, what: string): SchemaNode => ({
  type: 'array',
  items: item,
  maxItems: 1000,
  'x-expected': `a list of ${what}`,
});

const mcpServer: SchemaNode = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'transport'],
  'x-expected': 'an MCP server entry (a mapping with name and transport)',
  properties: {
    name: nameNode('server'),
    transport: { type: 'string', enum: ['http', 'stdio'], 'x-expected': 'one of "http", "stdio"' },
    url: httpUrl(),
    command: nonEmptyString('a non-empty string (the program to start)'),
    args: stringList({ type: 'string', maxLength: 4096, 'x-expected': 'a string' }, 'strings (arguments)'),
    env: stringList(
      {
        type: 'string',
        pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
        'x-expected': 'an environment variable name (letters, digits, "_")',
      },
      'environment variable names to pass through',
    ),
    timeout_seconds: positiveSeconds(3600),
    tools: {
      type: 'object',
      additionalProperties: false,
      'x-expected': 'a mapping with optional allow and deny lists',
      properties: {
        allow: stringList(nonEmptyString('a tool name'), 'tool names'),
        deny: stringList(nonEmptyString('a tool name'), 'tool names'),
      },
    },
  },
  allOf: [
    {
      if: { properties: { transport: { const: 'http' } }, required: ['transport'] },
      then: { required: ['url'], 'x-when': 'transport is "http"' },
    },
    {
      if: { properties: { transport: { const: 'stdio' } }, required: ['transport'] },
      then: { required: ['command'], 'x-when': 'transport is "stdio"' },
    },
  ],
};

const a2aAgent: SchemaNode = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'url'],
  'x-expected': 'an A2A agent entry (a mapping with name and url)',
  properties: {
    name: nameNode('agent'),
    url: httpUrl(),
  },
};

/** One tag's handler timeout (worker.handler_timeouts). */
const handlerTimeout: SchemaNode = {
  type: 'object',
  additionalProperties: false,
  required: ['tag', 'seconds'],
  'x-expected': 'a handler timeout entry (a mapping with tag and seconds)',
  properties: {
    tag: {
      type: 'string',
      pattern: '^[A-Za-z0-9_-]+$',
      minLength: 1,
      maxLength: 64,
      'x-expected': 'a tag of 1-64 characters from A-Z, a-z, 0-9, "_" and "-"',
    },
    seconds: positiveSeconds(2_000_000),
  },
};

const section = (properties: Record<string, SchemaNode>, what: string): SchemaNode => ({
  type: 'object',
  additionalProperties: false,
  properties,
  'x-expected': `a mapping (${what})`,
});

/** The schema of `amf.yaml` (snake_case keys, as written in the file). */
export const CONFIG_SCHEMA: SchemaNode = {
  $id: 'https://amf.local/schemas/amf-config.json',
  title: 'AMF configuration (amf.yaml)',
  type: 'object',
  additionalProperties: false,
  'x-expected': 'a mapping of configuration sections',
  properties: {
    data_dir: nonEmptyString('a directory path'),
    log_level: {
      type: 'string',
      enum: ['trace', 'debug', 'info', 'warn', 'error', 'silent'],
      'x-expected': 'one of "trace", "debug", "info", "warn", "error", "silent"',
    },
    coordinator: section(
      {
        host: nonEmptyString('a host name or IP address to listen on'),
        port: port(),
        api_key: { ...nullable(nonEmptyString('a non-empty string')), 'x-secret': true },
        url: httpUrl(),
      },
      'coordinator settings',
    ),
    nats: section(
      {
        url: nullable({
          type: 'string',
          pattern: NATS_URL,
          maxLength: 4096,
          'x-expected': 'a NATS URL such as nats://127.0.0.1:4222 (comma-separated for a cluster)',
        }),
        port: port(),
        server_binary: nonEmptyString('the nats-server program name or path'),
        max_payload_bytes: intRange(1024, 67108864, 'a whole number of bytes'),
        // JetStream caps replicas at 5; more than the cluster's node count fails at stream creation.
        replicas: intRange(1, 5, 'a number of replicas'),
        // null = sized from the data dir's free space (jetstream.ts, storeBudget).
        store_max_bytes: nullable(
          intRange(16 * 1024 * 1024, 1024 ** 4, 'a whole number of bytes, at least 16 MiB'),
        ),
        // null = on when an external NATS is used and the data dir holds callout.nkey.
        auth_callout: nullable(boolean()),
        auth_callout_ttl_seconds: intRange(5, 86400, 'a number of seconds'),
        // Log files of an external server on this machine: its permission refusals become warnings.
        server_logs: {
          ...stringList(nonEmptyString('a log file path'), 'nats-server log file paths'),
          maxItems: 16,
        },
      },
      'NATS settings',
    ),
    mdns: section(
      {
        enabled: boolean(),
        interface: nullable(nonEmptyString('an IP address of the interface to advertise on')),
      },
      'mDNS settings',
    ),
    policy: section(
      {
        opa_url: nullable(httpUrl()),
        path: nullable(nonEmptyString('a path to a policy bundle or .rego directory')),
      },
      'policy settings',
    ),
    identity: section(
      {
        mode: {
          type: ['string', 'null'],
          enum: ['static', 'spiffe', null],
          'x-expected': 'one of "static", "spiffe", or null',
        },
        trust_domain: {
          type: 'string',
          pattern: '^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$',
          maxLength: 255,
          'x-expected': 'a trust domain name (lowercase letters, digits, "." and "-")',
        },
        legacy_unsigned_agents: boolean(),
      },
      'identity settings',
    ),
    tasks: section(
      {
        ttl_seconds: positiveSeconds(86400),
        max_retries: intRange(0, 100),
        worker_loss_retries: intRange(0, 100),
        retry_delay_seconds: {
          type: 'number',
          minimum: 0,
          maximum: 3600,
          'x-expected': 'a number of seconds between 0 and 3600',
        },
        watchdog_grace_factor: {
          type: 'number',
          minimum: 1,
          maximum: 100,
          'x-expected': 'a number between 1 and 100',
        },
        retained_terminal_tasks: intRange(0, 10_000_000),
        max_task_bytes: intRange(1, 67108864, 'a whole number of bytes'),
      },
      'task settings',
    ),
    heartbeat: section(
      {
        interval_seconds: positiveSeconds(3600),
        offline_after_missed: intRange(1, 1000),
      },
      'heartbeat settings',
    ),
    openai: section(
      {
        request_timeout_seconds: positiveSeconds(3600),
        max_body_bytes: intRange(1, 1073741824, 'a whole number of bytes'),
      },
      'OpenAI-compatible API settings',
    ),
    http: section(
      {
        rate_limit_per_second: {
          type: 'number',
          minimum: 0,
          maximum: 1_000_000,
          'x-expected': 'requests per second per client between 0 (off) and 1000000',
        },
        rate_limit_burst: intRange(1, 1_000_000),
        max_body_bytes: intRange(1, 1073741824, 'a whole number of bytes'),
        request_timeout_seconds: positiveSeconds(3600),
        amp_max_jobs: intRange(1, 1_000_000),
        allow_private_callbacks: boolean(),
        headers_timeout_seconds: positiveSeconds(3600),
        body_timeout_seconds: positiveSeconds(3600),
        sse_max_clients: intRange(1, 100_000),
        // At least 64 KiB so ordinary events fit; larger events than the cap are summarised (eventStream.ts).
        sse_max_buffered_bytes: intRange(65536, 1073741824, 'a whole number of bytes'),
      },
      'HTTP edge guards and AMP/Fabric settings',
    ),
    worker: section(
      {
        name: nullable({
          type: 'string',
          minLength: 1,
          maxLength: 63,
          'x-expected': 'a name of 1-63 characters',
        }),
        tags: {
          type: 'array',
          uniqueItems: true,
          maxItems: 256,
          'x-expected': 'a list of distinct capability tags',
          // Tags become NATS subject tokens (amf.task.announce.<tag>): no dots, wildcards or spaces.
          items: {
            type: 'string',
            pattern: '^[A-Za-z0-9_-]+$',
            minLength: 1,
            maxLength: 64,
            'x-expected': 'a tag of 1-64 characters from A-Z, a-z, 0-9, "_" and "-"',
          },
        },
        port: port(),
        host: nonEmptyString('a host name or IP address to listen on'),
        trust: nonEmptyString('a trust level such as "local"'),
        handler: nonEmptyString('"echo" or a path to a handler module'),
        concurrency: intRange(1, 4096),
        // Within one setTimeout (2^31 ms): 24 days.
        handler_timeout_seconds: positiveSeconds(2_000_000),
        handler_timeouts: {
          type: 'array',
          items: handlerTimeout,
          maxItems: 256,
          'x-expected': 'a list of {tag, seconds} entries',
        },
      },
      'worker settings',
    ),
    mcp: section(
      {
        require_tls: boolean(),
        servers: {
          type: 'array',
          items: mcpServer,
          maxItems: 256,
          'x-expected': 'a list of MCP server entries',
        },
        session_idle_seconds: intRange(1, 86_400, 'a whole number of seconds'),
        max_sessions: intRange(1, 1_000_000),
        max_sessions_per_client: intRange(1, 1_000_000),
        bare_names: boolean(),
        reexport_servers: boolean(),
      },
      'MCP settings',
    ),
    a2a: section(
      {
        agents: {
          type: 'array',
          items: a2aAgent,
          maxItems: 256,
          'x-expected': 'a list of A2A agent entries',
        },
        task_store_size: intRange(1, 1_000_000),
        // Within one setTimeout (2^31 ms): 14 days.
        input_ttl_seconds: intRange(1, 1_209_600, 'a whole number of seconds'),
        default_agent: nullable(nonEmptyString('a capability tag or an agent name')),
      },
      'A2A settings',
    ),
    watcher: section({ integrity_warn: boolean() }, 'watcher settings'),
    history: section(
      {
        max_age_seconds: intRange(60, 31_536_000, 'a whole number of seconds'),
        max_bytes: intRange(1_048_576, 1_099_511_627_776, 'a whole number of bytes'),
        max_messages: intRange(1000, 1_000_000_000),
      },
      'event history stream limits',
    ),
    artifacts: section(
      {
        max_age_seconds: intRange(60, 31_536_000, 'a whole number of seconds'),
        max_bytes: intRange(1_048_576, 1_099_511_627_776, 'a whole number of bytes'),
        max_messages: intRange(100, 1_000_000_000),
        // Within NATS' own ceiling on one message (payloadLimits.ts).
        max_event_bytes: intRange(1024, 67_108_864, 'a whole number of bytes'),
        agent_bytes_per_minute: intRange(1024, 1_099_511_627_776, 'a whole number of bytes'),
        agent_events_per_minute: intRange(1, 1_000_000_000),
      },
      'artifact and evidence stream limits and per-agent quotas',
    ),
    task_events: section(
      {
        max_event_bytes: intRange(1024, 67_108_864, 'a whole number of bytes'),
        agent_bytes_per_minute: intRange(1024, 1_099_511_627_776, 'a whole number of bytes'),
        agent_events_per_minute: intRange(1, 1_000_000_000),
      },
      'per-agent quotas on task events and stored results (what the coordinators record for an agent)',
    ),
  },
};
