/**
 * JSON Schema of the AFM v0.3.0 front matter (structure only; cross-field rules such as unique MCP
 * names, authentication fields per type or webhook-only `http:` variables live in semanticChecks.ts).
 * Every object is closed (`additionalProperties: false`) so a misspelt key is reported, except
 * authentication objects (type-specific fields) and the JSON Schemas of signatures. The top level also
 * accepts `x-…` extension keys. `hint` is our own annotation: the sentence shown when a pattern or
 * enum does not match.
 */

const str = { type: 'string' } as const;
const nonEmpty = { type: 'string', minLength: 1, maxLength: 4096 } as const;
const stringList = { type: 'array', items: nonEmpty, maxItems: 256 } as const;

const authentication = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { type: 'string', minLength: 1, maxLength: 64 },
  },
  additionalProperties: true,
} as const;

const signature = {
  type: 'object',
  additionalProperties: false,
  properties: {
    input: { type: 'object' },
    output: { type: 'object' },
  },
} as const;

const exposure = {
  type: 'object',
  additionalProperties: false,
  properties: {
    http: {
      type: 'object',
      additionalProperties: false,
      properties: {
        path: {
          type: 'string',
          pattern: "^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$",
          maxLength: 256,
          hint: 'must be a URL path starting with "/" (no query or fragment), e.g. /chat',
        },
      },
    },
  },
} as const;

const subscription = {
  type: 'object',
  additionalProperties: false,
  required: ['protocol'],
  properties: {
    protocol: nonEmpty,
    hub: str,
    topic: str,
    callback: str,
    secret: str,
    authentication,
  },
} as const;

const interfaceSchema = {
  type: 'object',
  required: ['type'],
  properties: { type: { type: 'string' } },
  discriminator: { propertyName: 'type' },
  oneOf: [
    {
      properties: { type: { const: 'consolechat' }, signature },
      additionalProperties: false,
    },
    {
      properties: { type: { const: 'webchat' }, signature, exposure },
      additionalProperties: false,
    },
    {
      properties: {
        type: { const: 'webhook' },
        prompt: { type: 'string', maxLength: 65536 },
        signature,
        exposure,
        subscription,
      },
      additionalProperties: false,
    },
  ],
} as const;

const transport = {
  type: 'object',
  required: ['type'],
  properties: { type: { type: 'string' } },
  discriminator: { propertyName: 'type' },
  oneOf: [
    {
      required: ['url'],
      properties: { type: { const: 'http' }, url: nonEmpty, authentication },
      additionalProperties: false,
    },
    {
      required: ['command'],
      properties: {
        type: { const: 'stdio' },
        command: nonEmpty,
        args: { type: 'array', items: str, maxItems: 256 },
        env: {
          type: 'object',
          propertyNames: {
            pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
            hint: 'must be an environment variable name',
          },
          additionalProperties: str,
        },
      },
      additionalProperties: false,
    },
  ],
} as const;

const mcpServer = {
  type: 'object',
  required: ['name', 'transport'],
  additionalProperties: false,
  properties: {
    name: {
      type: 'string',
      pattern: '^[A-Za-z0-9_.-]{1,64}$',
      hint: 'must be 1-64 characters of letters, digits, "_", "." or "-" (it prefixes tool names)',
    },
    transport,
    tool_filter: {
      type: 'object',
      additionalProperties: false,
      properties: {
        allow: { ...stringList, uniqueItems: true },
        deny: { ...stringList, uniqueItems: true },
      },
    },
  },
} as const;

const servedName = {
  type: 'string',
  pattern: '^[A-Za-z0-9_.-]{1,64}$',
  hint: 'must be 1-64 characters of letters, digits, "_", "." or "-"',
} as const;

/** A resource the agent serves on its `/mcp` (exactly one of `text` / `file`: semanticChecks.ts). */
const servedResource = {
  type: 'object',
  required: ['uri', 'name'],
  additionalProperties: false,
  properties: {
    uri: {
      type: 'string',
      maxLength: 1024,
      pattern: '^[A-Za-z][A-Za-z0-9+.-]*:[^\\s]+$',
      hint: 'must be an absolute URI without spaces, e.g. docs://style-guide',
    },
    name: { type: 'string', minLength: 1, maxLength: 128 },
    description: { type: 'string', maxLength: 4096 },
    mimeType: {
      type: 'string',
      pattern: '^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}$',
      hint: 'must be a media type such as text/markdown',
    },
    text: { type: 'string', maxLength: 65536 },
    file: { type: 'string', minLength: 1, maxLength: 1024 },
  },
} as const;

/** A prompt the agent serves on its `/mcp`; `${arg:NAME}` in `template` is an argument. */
const servedPrompt = {
  type: 'object',
  required: ['name', 'template'],
  additionalProperties: false,
  properties: {
    name: servedName,
    description: { type: 'string', maxLength: 4096 },
    arguments: {
      type: 'array',
      maxItems: 32,
      items: {
        type: 'object',
        required: ['name'],
        additionalProperties: false,
        properties: {
          name: servedName,
          description: { type: 'string', maxLength: 4096 },
          required: { type: 'boolean' },
        },
      },
    },
    template: { type: 'string', minLength: 1, maxLength: 65536 },
  },
} as const;

/** `x-amf.mcp`: what the agent serves over MCP besides its own tool. */
const meshMcp = {
  type: 'object',
  additionalProperties: false,
  properties: {
    resources: { type: 'array', items: servedResource, maxItems: 64 },
    prompts: { type: 'array', items: servedPrompt, maxItems: 64 },
    reexport_servers: { type: 'boolean' },
  },
} as const;

const meshOptions = {
  type: 'object',
  additionalProperties: false,
  properties: {
    tags: {
      type: 'array',
      maxItems: 32,
      uniqueItems: true,
      items: {
        type: 'string',
        pattern: '^[a-z0-9-]{1,64}$',
        hint: 'must be 1-64 characters of a-z, 0-9 or "-"',
      },
    },
    trust: {
      type: 'string',
      pattern: '^[a-z0-9.-]{1,64}$',
      hint: 'must be a trust domain such as local, team or public',
    },
    visibility: { enum: ['local', 'mesh', 'public'] },
    tool_alias: {
      type: 'string',
      pattern: '^[A-Za-z0-9_.-]{1,64}$',
      hint: 'must be 1-64 characters of letters, digits, "_", "." or "-"',
    },
    mcp: meshMcp,
  },
} as const;

/** The front-matter schema. */
export const AFM_FRONT_MATTER_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  patternProperties: { '^x-(?!amf$)': true },
  properties: {
    spec_version: nonEmpty,
    name: { type: 'string', minLength: 1, maxLength: 128 },
    description: { type: 'string', maxLength: 4096 },
    version: { type: 'string', minLength: 1, maxLength: 64 },
    author: nonEmpty,
    authors: stringList,
    provider: {
      type: 'object',
      additionalProperties: false,
      properties: { name: nonEmpty, url: nonEmpty },
    },
    icon_url: nonEmpty,
    license: nonEmpty,
    model: {
      type: 'object',
      additionalProperties: false,
      properties: { name: nonEmpty, provider: nonEmpty, url: nonEmpty, authentication },
    },
    interfaces: {
      type: 'array',
      minItems: 1,
      maxItems: 16,
      items: interfaceSchema,
      hint: 'must list at least one interface (leave it out for the default consolechat)',
    },
    tools: {
      type: 'object',
      additionalProperties: false,
      properties: { mcp: { type: 'array', items: mcpServer, maxItems: 64 } },
    },
    max_iterations: { type: 'integer', minimum: 1, maximum: 1000 },
    'x-amf': meshOptions,
  },
} as const;
