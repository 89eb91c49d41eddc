// AFM parser: valid files and every default (AFM 5.1-5.6), loaded from fixtures and inline texts.
import { describe, expect, it } from 'vitest';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { loadAfmFile, parseAfm, validateAfmFile, DEFAULT_MAX_ITERATIONS } from '../../src/afm/index.js';
import type { AfmDefinition } from '../../src/afm/index.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/afm/', import.meta.url));
const fixture = (name: string): string => path.join(FIXTURES, name);
const BODY = '# Role\n\nYou help.\n\n# Instructions\n\nBe kind.\n';

function parseOk(text: string, file = '/tmp/agent.afm.md', env: Record<string, string> = {}): AfmDefinition {
  const result = parseAfm(text, file, { resolve: true, env, dataDir: '/nonexistent' });
  expect(result.problems.filter((p) => p.severity === 'error')).toEqual([]);
  if (!result.definition) throw new Error('no definition');
  return result.definition;
}

describe('valid fixtures', () => {
  it('loads the full-featured file with every field, resolving env and secret variables', async () => {
    const def = await loadAfmFile(fixture('full.afm.md'), {
      env: {
        AFM_TEST_TOKEN: 'tok-1',
        AFM_TEST_WEBHOOK_SECRET: 'hook-secret',
        AMF_SECRET_GITHUB_KEY: 'gh-key',
      },
      dataDir: '/nonexistent',
    });
    expect(def.spec_version).toBe('0.3.0');
    expect(def.name).toBe('Release Notes Writer');
    expect(def.description).toBe('Writes release notes from merged pull requests');
    expect(def.version).toBe('1.2.0');
    expect(def.authors).toEqual(['Jane Smith <jane@example.com>', 'John Doe <john@example.com>']);
    expect(def.provider).toEqual({ name: 'Example AI Solutions', url: 'https://example.com' });
    expect(def.icon_url).toBe('https://example.com/icons/notes.png');
    expect(def.license).toBe('MIT');
    expect(def.model).toEqual({
      name: 'gpt-4o-mini',
      provider: 'openai',
      url: 'http://127.0.0.1:11434/v1',
      authentication: { type: 'bearer', token: 'tok-1' },
    });
    expect(def.max_iterations).toBe(7);
    expect(def.interfaces.map((i) => i.type)).toEqual(['webchat', 'consolechat', 'webhook']);
    const [webchat, consolechat, webhook] = def.interfaces;
    expect(webchat?.type === 'webchat' && webchat.exposure.http.path).toBe('/notes');
    expect(webchat?.signature.input).toEqual({
      type: 'object',
      properties: { message: { type: 'string' } },
      required: ['message'],
    });
    expect(webchat?.signature.input_declared).toBe(true);
    expect(consolechat?.signature).toEqual({
      input: { type: 'string' },
      output: { type: 'string' },
      input_declared: false,
      output_declared: false,
    });
    if (webhook?.type !== 'webhook') throw new Error('webhook expected');
    expect(webhook.prompt).toBe('A ${http:payload.action} event from ${http:header.User-Agent}.\n');
    expect(webhook.exposure.http.path).toBe('/webhook');
    expect(webhook.subscription).toEqual({
      protocol: 'websub',
      hub: 'http://127.0.0.1:9/hub',
      topic: 'http://127.0.0.1:9/topics/prs',
      secret: 'hook-secret',
    });
    expect(webhook.signature.input).toEqual({});
    expect(webhook.signature.output).toEqual({ type: 'string' });
    expect(def.tools.mcp).toEqual([
      {
        name: 'github',
        transport: {
          type: 'http',
          url: 'http://127.0.0.1:9/mcp',
          authentication: { type: 'api-key', api_key: 'gh-key', header: 'X-Api-Key' },
        },
        tool_filter: { allow: ['list_prs', 'get_pr', 'merge_pr'], deny: ['merge_pr'] },
      },
      {
        name: 'files',
        transport: {
          type: 'stdio',
          command: 'node',
          args: ['server.mjs', '--root', '.'],
          env: { LOG_LEVEL: 'debug' },
        },
      },
    ]);
    expect(def['x-amf']).toEqual({
      tags: ['release-notes', 'writing'],
      trust: 'team',
      visibility: 'mesh',
      tool_alias: 'notes',
      mcp: { resources: [], prompts: [], reexport_servers: false },
    });
    expect(def.role).toBe('You write release notes.\nThey are short.\n\nSecond paragraph of the role.');
    expect(def.instructions).toBe(
      'Group changes by area.\n\n# Examples\n\nThis heading stays inside the instructions.',
    );
    expect(Object.isFrozen(def)).toBe(true);
    expect(Object.isFrozen(def.tools.mcp[0])).toBe(true);
  });

  it('keeps positions of front-matter values in the source map', async () => {
    const def = await loadAfmFile(fixture('full.afm.md'), {
      env: { AFM_TEST_TOKEN: 't', AFM_TEST_WEBHOOK_SECRET: 's', AMF_SECRET_GITHUB_KEY: 'k' },
    });
    expect(def.source.path).toBe(fixture('full.afm.md'));
    expect(def.source.position('/model/name')).toEqual({ line: 16, column: 9 });
    expect(def.source.position('/tools/mcp/1/transport/command')).toEqual({ line: 64, column: 18 });
    expect(def.source.position('/interfaces/2/exposure')).toBeUndefined();
    expect(def.source.role_line).toBe(75);
    expect(def.source.instructions_line).toBe(82);
  });

  it('accepts a body-only .afm file and fills every default', async () => {
    const def = await loadAfmFile(fixture('minimal.afm'), { env: {} });
    expect(def.name).toBe('minimal');
    expect(def.description).toBe('You answer questions about the weather in one sentence.');
    expect(def.version).toBe('0.0.0');
    expect(def.authors).toEqual([]);
    expect(def.model).toEqual({});
    expect(def.interfaces).toEqual([
      {
        type: 'consolechat',
        signature: {
          input: { type: 'string' },
          output: { type: 'string' },
          input_declared: false,
          output_declared: false,
        },
      },
    ]);
    expect(def.tools).toEqual({ mcp: [] });
    expect(def.max_iterations).toBe(DEFAULT_MAX_ITERATIONS);
    expect(def['x-amf']).toEqual({
      tags: [],
      trust: 'local',
      visibility: 'local',
      mcp: { resources: [], prompts: [], reexport_servers: false },
    });
    expect(def.spec_version).toBeUndefined();
  });

  it('validates the webhook triage fixture with its bracket and root template variables', async () => {
    const result = await validateAfmFile(fixture('webhook-triage.afm.md'), { env: {} });
    expect(result.problems).toEqual([]);
    const hook = result.definition?.interfaces[0];
    expect(hook?.type === 'webhook' && hook.exposure.http.path).toBe('/hooks/github');
    expect(hook?.signature.output_declared).toBe(true);
    expect(hook?.signature.input_declared).toBe(false);
  });

  it('validates the spec example without its environment variable, as a note', async () => {
    const result = await validateAfmFile(fixture('math-tutor.afm.md'), { env: {} });
    expect(result.problems).toEqual([
      expect.objectContaining({
        severity: 'note',
        line: 14,
        column: 15,
        message: expect.stringContaining('MATH_MCP_SERVER'),
      }),
    ]);
    expect(result.definition?.name).toBe('Math Tutor');
  });
});

describe('defaults', () => {
  it('takes the name from the file name (.afm.md and .afm)', () => {
    expect(parseOk(BODY, '/x/code-reviewer.afm.md').name).toBe('code-reviewer');
    expect(parseOk(BODY, '/x/Summarizer.AFM').name).toBe('Summarizer');
  });

  it('takes the description from the first paragraph of # Role, collapsed and bounded', () => {
    const role = `${'word '.repeat(100)}\nmore\n\nsecond paragraph`;
    const def = parseOk(`# Role\n\n${role}\n\n# Instructions\n\ni\n`);
    expect(def.description.endsWith('…')).toBe(true);
    expect(def.description.length).toBeLessThanOrEqual(300);
    expect(def.description.startsWith('word word')).toBe(true);
    expect(parseOk(`# Role\nOne\nline.\n\nTwo.\n# Instructions\ni\n`).description).toBe('One line.');
  });

  it('uses author when authors is absent, and authors over author', () => {
    expect(parseOk(`---\nauthor: "A <a@x>"\n---\n${BODY}`).authors).toEqual(['A <a@x>']);
    const both = parseAfm(`---\nauthor: "A <a@x>"\nauthors: ["B <b@x>"]\n---\n${BODY}`, '/t/a.afm.md', {
      resolve: false,
      env: {},
    });
    expect(both.definition?.authors).toEqual(['B <b@x>']);
    expect(both.problems).toEqual([expect.objectContaining({ severity: 'note', line: 2, column: 1 })]);
  });

  it('defaults webchat to /chat and webhook to /webhook, with string signatures for chat', () => {
    const def = parseOk(`---\ninterfaces:\n  - type: webchat\n  - type: webhook\n---\n${BODY}`);
    expect(def.interfaces).toEqual([
      {
        type: 'webchat',
        signature: {
          input: { type: 'string' },
          output: { type: 'string' },
          input_declared: false,
          output_declared: false,
        },
        exposure: { http: { path: '/chat' } },
      },
      {
        type: 'webhook',
        signature: { input: {}, output: { type: 'string' }, input_declared: false, output_declared: false },
        exposure: { http: { path: '/webhook' } },
      },
    ]);
  });

  it('accepts an empty front matter, CRLF line ends and a byte-order mark', () => {
    expect(parseOk(`---\n---\n${BODY}`).name).toBe('agent');
    const crlf = `\uFEFF---\r\nname: crlf\r\n---\r\n${BODY.replace(/\n/g, '\r\n')}`;
    const def = parseOk(crlf);
    expect(def.name).toBe('crlf');
    expect(def.instructions).toBe('Be kind.');
  });

  it('matches headings case-insensitively with closing hashes, and in either order', () => {
    const def = parseOk('# INSTRUCTIONS #\n\nDo it.\n\n#   role\n\nHelper.\n');
    expect(def.role).toBe('Helper.');
    expect(def.instructions).toBe('Do it.');
  });

  it('lower-cases authentication types and model providers and keeps other auth fields', () => {
    const def = parseOk(
      `---\nmodel:\n  provider: Anthropic\n  authentication:\n    type: BASIC\n    username: u\n    password: p\n---\n${BODY}`,
    );
    expect(def.model).toEqual({
      provider: 'anthropic',
      authentication: { type: 'basic', username: 'u', password: 'p' },
    });
  });

  it('reads YAML 1.2 (yes/no/on/off stay strings)', () => {
    const def = parseOk(`---\nname: yes\nlicense: off\n---\n${BODY}`);
    expect(def.name).toBe('yes');
    expect(def.license).toBe('off');
  });

  it('ignores x- extension keys other than x-amf, with a note', () => {
    const result = parseAfm(`---\nx-vendor: {a: 1}\n---\n${BODY}`, '/t/a.afm.md', {
      resolve: false,
      env: {},
    });
    expect(result.definition).toBeDefined();
    expect(result.problems).toEqual([
      expect.objectContaining({
        severity: 'note',
        line: 2,
        column: 1,
        message: "extension key 'x-vendor' is ignored",
      }),
    ]);
  });
});
