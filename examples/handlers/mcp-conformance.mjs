// A worker handler that serves the fixtures of the official MCP conformance suite
// (@modelcontextprotocol/conformance, `server --suite all`): its test tools, resources, resource
// template, prompts, completion and logging. Run it as a worker and point the suite at the worker's
// `/mcp`, or at the coordinator's `/mcp` with the worker admitted (scripts/conformance-mcp.mjs):
//
//   amf worker --handler examples/handlers/mcp-conformance.mjs --tags mcp-conformance
//
// The handler itself is the suite's `test_simple_text` tool; everything else is `mcp` (the
// WorkerHandler MCP surface, docs/mcp-server.md).
import { Buffer } from 'node:buffer';
import { setTimeout as sleep } from 'node:timers/promises';

/** A 1×1 transparent PNG. */
const PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

/** A valid 8 kHz mono 8-bit WAV of 8 silent samples. */
function silentWav() {
  const samples = Buffer.alloc(8, 0x80);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + samples.length, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(8000, 24);
  header.writeUInt32LE(8000, 28);
  header.writeUInt16LE(1, 32);
  header.writeUInt16LE(8, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(samples.length, 40);
  return Buffer.concat([header, samples]).toString('base64');
}

const NO_ARGS = { type: 'object', properties: {} };
const text = (t) => ({ content: [{ type: 'text', text: t }] });

/** A tool that always answers `result`. */
function fixed(name, description, result) {
  return {
    definition: { name, description, inputSchema: NO_ARGS },
    call: async () => JSON.parse(JSON.stringify(result)),
  };
}

/** Subscribers of resource updates (the endpoint wires one per session). */
const updateListeners = new Set();

const tools = [
  fixed('test_image_content', 'returns an image', {
    content: [{ type: 'image', data: PNG, mimeType: 'image/png' }],
  }),
  fixed('test_audio_content', 'returns audio', {
    content: [{ type: 'audio', data: silentWav(), mimeType: 'audio/wav' }],
  }),
  fixed('test_embedded_resource', 'returns an embedded resource', {
    content: [
      {
        type: 'resource',
        resource: {
          uri: 'test://embedded-resource',
          mimeType: 'text/plain',
          text: 'This is an embedded resource content.',
        },
      },
    ],
  }),
  fixed('test_multiple_content_types', 'returns text, an image and a resource', {
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      {
        type: 'resource',
        resource: {
          uri: 'test://mixed-content-resource',
          mimeType: 'application/json',
          text: '{"test":"data","value":123}',
        },
      },
    ],
  }),
  fixed('test_error_handling', 'fails on purpose', {
    content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }],
    isError: true,
  }),
  {
    definition: {
      name: 'test_tool_with_logging',
      description: 'logs three messages while it runs',
      inputSchema: NO_ARGS,
    },
    async call(_args, ctx) {
      await ctx.log('info', 'Tool execution started', 'conformance');
      await sleep(50);
      await ctx.log('info', 'Tool processing data', 'conformance');
      await sleep(50);
      await ctx.log('info', 'Tool execution completed', 'conformance');
      return text('Tool with logging executed successfully');
    },
  },
  {
    definition: {
      name: 'test_tool_with_progress',
      description: 'reports progress 0, 50, 100',
      inputSchema: NO_ARGS,
    },
    async call(_args, ctx) {
      for (const step of [0, 50, 100]) {
        await ctx.progress(step, 100, `Completed step ${step / 50 + 1} of 3`);
        await sleep(20);
      }
      return text('Progress test completed');
    },
  },
  {
    definition: {
      name: 'test_sampling',
      description: 'asks the client model',
      inputSchema: { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] },
    },
    async call(args, ctx) {
      const answer = await ctx.sample({
        messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt ?? '') } }],
        maxTokens: 100,
      });
      const reply = answer.content?.type === 'text' ? answer.content.text : JSON.stringify(answer.content);
      return text(`LLM response: ${reply}`);
    },
  },
  {
    definition: {
      name: 'test_elicitation',
      description: 'asks the user',
      inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
    },
    async call(args, ctx) {
      const answer = await ctx.elicit({
        message: String(args.message ?? ''),
        requestedSchema: {
          type: 'object',
          properties: {
            username: { type: 'string', description: "User's response" },
            email: { type: 'string', description: "User's email address" },
          },
          required: ['username', 'email'],
        },
      });
      return text(`User response: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`);
    },
  },
  {
    definition: {
      name: 'test_elicitation_sep1034_defaults',
      description: 'elicits with defaults',
      inputSchema: NO_ARGS,
    },
    async call(_args, ctx) {
      const answer = await ctx.elicit({
        message: 'Please review and update the form fields with defaults',
        requestedSchema: {
          type: 'object',
          properties: {
            name: { type: 'string', description: 'User name', default: 'John Doe' },
            age: { type: 'integer', description: 'User age', default: 30 },
            score: { type: 'number', description: 'User score', default: 95.5 },
            status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
            verified: { type: 'boolean', description: 'Verified', default: true },
          },
        },
      });
      return text(
        `Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`,
      );
    },
  },
  {
    definition: {
      name: 'test_elicitation_sep1330_enums',
      description: 'elicits five kinds of enum',
      inputSchema: NO_ARGS,
    },
    async call(_args, ctx) {
      const answer = await ctx.elicit({
        message: 'Please choose',
        requestedSchema: {
          type: 'object',
          properties: {
            untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
            titledSingle: {
              type: 'string',
              oneOf: [
                { const: 'value1', title: 'First Option' },
                { const: 'value2', title: 'Second Option' },
                { const: 'value3', title: 'Third Option' },
              ],
            },
            legacyEnum: {
              type: 'string',
              enum: ['opt1', 'opt2', 'opt3'],
              enumNames: ['Option One', 'Option Two', 'Option Three'],
            },
            untitledMulti: {
              type: 'array',
              items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
            },
            titledMulti: {
              type: 'array',
              items: {
                anyOf: [
                  { const: 'value1', title: 'First Choice' },
                  { const: 'value2', title: 'Second Choice' },
                  { const: 'value3', title: 'Third Choice' },
                ],
              },
            },
          },
        },
      });
      return text(
        `Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`,
      );
    },
  },
  {
    definition: {
      name: 'json_schema_2020_12_tool',
      description: 'Tool with JSON Schema 2020-12 features',
      inputSchema: {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        $defs: {
          address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } },
        },
        properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
        additionalProperties: false,
      },
    },
    call: async (args) => text(`received ${JSON.stringify(args)}`),
  },
  {
    // Not a suite fixture: lets tests and demos see a subscription's update notification.
    definition: {
      name: 'touch_watched_resource',
      description: 'marks test://watched-resource as changed',
      inputSchema: NO_ARGS,
    },
    async call() {
      for (const notify of updateListeners) notify('test://watched-resource');
      return text('test://watched-resource updated');
    },
  },
];

const resources = [
  {
    resource: {
      uri: 'test://static-text',
      name: 'static-text',
      description: 'a static text resource',
      mimeType: 'text/plain',
    },
    read: async () => ({
      contents: [
        {
          uri: 'test://static-text',
          mimeType: 'text/plain',
          text: 'This is the content of the static text resource.',
        },
      ],
    }),
  },
  {
    resource: {
      uri: 'test://static-binary',
      name: 'static-binary',
      description: 'a static PNG',
      mimeType: 'image/png',
    },
    read: async () => ({ contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: PNG }] }),
  },
  {
    resource: {
      uri: 'test://watched-resource',
      name: 'watched-resource',
      description: 'a resource to subscribe to',
      mimeType: 'text/plain',
    },
    read: async () => ({
      contents: [
        { uri: 'test://watched-resource', mimeType: 'text/plain', text: 'Watched resource content' },
      ],
    }),
  },
];

const resourceTemplates = [
  {
    template: {
      uriTemplate: 'test://template/{id}/data',
      name: 'template-data',
      description: 'data of one id',
      mimeType: 'application/json',
    },
    read: async (uri, vars) => ({
      contents: [
        {
          uri,
          mimeType: 'application/json',
          text: JSON.stringify({ id: vars.id, templateTest: true, data: `Data for ID: ${vars.id}` }),
        },
      ],
    }),
  },
];

const prompts = [
  {
    prompt: { name: 'test_simple_prompt', description: 'a simple prompt' },
    get: async () => ({
      messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
    }),
  },
  {
    prompt: {
      name: 'test_prompt_with_arguments',
      description: 'a prompt with two arguments',
      arguments: [
        { name: 'arg1', description: 'First test argument', required: true },
        { name: 'arg2', description: 'Second test argument', required: true },
      ],
    },
    get: async (args) => ({
      messages: [
        {
          role: 'user',
          content: { type: 'text', text: `Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'` },
        },
      ],
    }),
  },
  {
    prompt: {
      name: 'test_prompt_with_embedded_resource',
      description: 'a prompt that embeds a resource',
      arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
    },
    get: async (args) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: {
              uri: args.resourceUri,
              mimeType: 'text/plain',
              text: 'Embedded resource content for testing.',
            },
          },
        },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
      ],
    }),
  },
  {
    prompt: { name: 'test_prompt_with_image', description: 'a prompt with an image' },
    get: async () => ({
      messages: [
        { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
        { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
      ],
    }),
  },
];

const WORDS = ['paris', 'park', 'party', 'test', 'testing', 'testValue1'];

export default {
  name: 'test_simple_text',
  description: 'MCP conformance fixture: returns simple text',
  inputSchema: NO_ARGS,
  readOnly: true,
  handle: async () => 'This is a simple text response for testing.',
  mcp: {
    tools,
    resources,
    resourceTemplates,
    prompts,
    logging: true,
    complete: async (params) => WORDS.filter((w) => w.startsWith(params.argument.value)),
    subscriptions: { onUpdate: (notify) => updateListeners.add(notify) },
  },
};
