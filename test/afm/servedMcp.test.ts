// An AFM agent's `x-amf.mcp`: its declared resources and prompts, and its re-exported `tools.mcp`
// servers, read with the official MCP SDK client at the agent's own `/mcp` and through the
// coordinator's federated `/mcp` (real mesh, real stdio MCP server); a bad declaration is reported
// by `amf validate` with its line, and a resource file escaping the agent's directory is refused.
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startAfmAgent, type RunningAgent } from '../../src/apps/afmAgentApp.js';
import { validateCommand } from '../../src/cli/validateCommand.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const MATH_SERVER = path.resolve(import.meta.dirname, '../../examples/tools/mathServer.mjs');
const BODY = '# Role\nA guide.\n\n# Instructions\nAnswer briefly.\n';

const GUIDE = [
  '---',
  'name: guide',
  'model: { provider: openai, name: unused, url: "http://127.0.0.1:9/v1", authentication: { type: bearer, token: sk-test } }',
  'interfaces: [{ type: webchat }]',
  'tools:',
  '  mcp:',
  '    - name: math',
  `      transport: { type: stdio, command: node, args: [${JSON.stringify(MATH_SERVER)}] }`,
  '      tool_filter: { allow: [evaluate] }',
  'x-amf:',
  '  tags: [guide]',
  '  mcp:',
  '    reexport_servers: true',
  '    resources:',
  '      - { uri: "docs://style", name: style, description: The style guide, file: docs/style.md }',
  '      - { uri: "docs://motto", name: motto, text: Keep it short. }',
  '      - { uri: "docs://logo", name: logo, mimeType: image/png, file: logo.png }',
  '      - { uri: "docs://swapped", name: swapped, file: swapped.md }',
  '    prompts:',
  '      - name: review',
  '        description: Review a topic',
  '        arguments:',
  '          - { name: topic, description: What to review, required: true }',
  '          - { name: tone }',
  '        template: "Review ${arg:topic} in a ${arg:tone} tone; write $${arg:topic} literally."',
  '---',
  BODY,
].join('\n');

let dir: string;
let outside: string;
let mesh: TestMesh;
let agent: RunningAgent;

async function connect(url: string): Promise<Client> {
  const client = new Client({ name: 'afm-served-mcp-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
  return client;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'amf-served-mcp-'));
  outside = await mkdtemp(path.join(tmpdir(), 'amf-outside-'));
  await writeFile(path.join(outside, 'secret.md'), 'must not leak');
  await mkdir(path.join(dir, 'docs'));
  await writeFile(path.join(dir, 'docs/style.md'), '# Style\nShort sentences.\n');
  await writeFile(path.join(dir, 'logo.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47]));
  await writeFile(path.join(dir, 'swapped.md'), 'inside');
  await writeFile(path.join(dir, 'guide.afm.md'), GUIDE);
  mesh = await startTestMesh();
  agent = await startAfmAgent({
    file: path.join(dir, 'guide.afm.md'),
    port: 0,
    console: false,
    mesh: {
      natsUrl: mesh.coordinator.natsUrl,
      credential: mesh.coordinator.credentials.specialist,
      heartbeatSeconds: 1,
    },
  });
  await mesh.waitFor(
    () =>
      mesh.http.mcp
        .extras()
        .prompts.list()
        .some((p) => p.name === 'guide__review'),
    15_000,
    'the agent prompts federated',
  );
}, 60_000);

afterAll(async () => {
  await agent?.close();
  await mesh?.close();
  await rm(dir, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

describe('an AFM agent serving MCP resources and prompts', () => {
  it('lists and reads its resources and gets its prompts at its own /mcp', async () => {
    const client = await connect(agent.url!);
    try {
      const caps = client.getServerCapabilities()!;
      expect(caps.resources).toBeDefined();
      expect(caps.prompts).toBeDefined();
      const { resources } = await client.listResources();
      expect(resources.map((r) => [r.uri, r.mimeType])).toEqual([
        ['docs://style', 'text/markdown'],
        ['docs://motto', 'text/plain'],
        ['docs://logo', 'image/png'],
        ['docs://swapped', 'text/markdown'],
      ]);
      expect(resources[0]!.description).toBe('The style guide');
      expect((await client.readResource({ uri: 'docs://style' })).contents).toEqual([
        { uri: 'docs://style', mimeType: 'text/markdown', text: '# Style\nShort sentences.\n' },
      ]);
      expect((await client.readResource({ uri: 'docs://motto' })).contents).toEqual([
        { uri: 'docs://motto', mimeType: 'text/plain', text: 'Keep it short.' },
      ]);
      expect((await client.readResource({ uri: 'docs://logo' })).contents).toEqual([
        { uri: 'docs://logo', mimeType: 'image/png', blob: 'iVBORw==' },
      ]);

      const { prompts } = await client.listPrompts();
      expect(prompts).toEqual([
        {
          name: 'review',
          description: 'Review a topic',
          arguments: [
            { name: 'topic', description: 'What to review', required: true },
            { name: 'tone', required: false },
          ],
        },
      ]);
      const prompt = await client.getPrompt({
        name: 'review',
        arguments: { topic: 'the README', tone: 'kind' },
      });
      expect(prompt.messages).toEqual([
        {
          role: 'user',
          content: { type: 'text', text: 'Review the README in a kind tone; write ${arg:topic} literally.' },
        },
      ]);
      const noTone = await client.getPrompt({ name: 'review', arguments: { topic: 'x' } });
      expect(noTone.messages[0]!.content).toEqual({
        type: 'text',
        text: 'Review x in a  tone; write ${arg:topic} literally.',
      });
      await expect(client.getPrompt({ name: 'review', arguments: {} })).rejects.toThrow(/topic is required/);
    } finally {
      await client.close();
    }
  });

  it('re-exports its tools.mcp server at its own /mcp (filtered, callable)', async () => {
    const client = await connect(agent.url!);
    try {
      const names = (await client.listTools()).tools.map((t) => t.name).sort();
      expect(names).toEqual(['guide', 'math__evaluate']);
      const result = await client.callTool({ name: 'math__evaluate', arguments: { expression: '6*7' } });
      expect(result.content).toEqual([{ type: 'text', text: '42' }]);
    } finally {
      await client.close();
    }
  });

  it('is federated by the coordinator /mcp under the agent name', async () => {
    const client = await connect(mesh.url);
    try {
      const uris = (await client.listResources()).resources.map((r) => r.uri);
      expect(uris).toEqual(expect.arrayContaining(['amf://guide/docs://style', 'amf://guide/docs://motto']));
      const read = await client.readResource({ uri: 'amf://guide/docs://style' });
      expect(read.contents).toEqual([
        { uri: 'amf://guide/docs://style', mimeType: 'text/markdown', text: '# Style\nShort sentences.\n' },
      ]);
      const prompt = await client.getPrompt({
        name: 'guide__review',
        arguments: { topic: 'logs', tone: 'dry' },
      });
      expect(prompt.messages[0]!.content).toMatchObject({
        text: expect.stringMatching(/^Review logs in a dry tone;/),
      });
      const tools = (await client.listTools()).tools.map((t) => t.name);
      expect(tools).toContain('guide__math__evaluate');
      const result = await client.callTool({
        name: 'guide__math__evaluate',
        arguments: { expression: '2+3' },
      });
      expect(result.content).toEqual([{ type: 'text', text: '5' }]);
    } finally {
      await client.close();
    }
  });

  it('refuses a resource file that became a symlink out of the agent directory', async () => {
    await rm(path.join(dir, 'swapped.md'));
    await symlink(path.join(outside, 'secret.md'), path.join(dir, 'swapped.md'));
    const client = await connect(agent.url!);
    try {
      await expect(client.readResource({ uri: 'docs://swapped' })).rejects.toThrow(
        /'swapped.md' is outside the AFM file's directory/,
      );
    } finally {
      await client.close();
    }
  });
});

describe('bad x-amf.mcp declarations', () => {
  it('amf validate reports each with its line and column', async () => {
    const file = path.join(dir, 'bad.afm.md');
    await writeFile(
      file,
      [
        '---',
        'description: "about ${arg:x}"',
        'x-amf:',
        '  tags: [bad]',
        '  mcp:',
        '    resources:',
        '      - uri: "docs://escape"',
        '        name: escape',
        '        file: ../secret.md',
        '      - { uri: "docs://both", name: both, text: hi, file: docs/style.md }',
        '      - { uri: "not a uri", name: bad, text: x }',
        '    prompts:',
        '      - name: review',
        '        arguments: [{ name: topic }]',
        '        template: "Review ${arg:topc}"',
        '        colour: red',
        '---',
        BODY,
      ].join('\n'),
    );
    const out: string[] = [];
    const code = await validateCommand([file], { write: (s: string) => void out.push(s) }, {});
    expect(code).toBe(1);
    expect(out.join('').trimEnd().split('\n')).toEqual([
      `${file}:2:21: \${arg:x}: arg variables are only allowed in the template of an x-amf.mcp prompt`,
      `${file}:9:15: file '../secret.md' is outside the AFM file's directory`,
      `${file}:10:9: a resource needs exactly one of 'text' or 'file' (it has both)`,
      `${file}:11:16: x-amf.mcp.resources[2].uri must be an absolute URI without spaces, e.g. docs://style-guide`,
      `${file}:14:20: note: argument 'topic' is declared but the template never uses it`,
      `${file}:15:27: \${arg:topc}: 'topc' is not one of this prompt's arguments (declare it under arguments)`,
      `${file}:16:9: unknown key 'colour' in x-amf.mcp.prompts[0]; allowed keys: name, description, arguments, template`,
    ]);
  });

  it('an agent whose resource file escapes through a symlink does not start', async () => {
    await symlink(path.join(outside, 'secret.md'), path.join(dir, 'leak.md'));
    const file = path.join(dir, 'leaky.afm.md');
    await writeFile(
      file,
      [
        '---',
        GUIDE.split('\n')[2]!,
        'x-amf:',
        '  mcp:',
        '    resources:',
        '      - { uri: "docs://leak", name: leak, file: leak.md }',
        '---',
        BODY,
      ].join('\n'),
    );
    await expect(
      startAfmAgent({
        file,
        port: 0,
        console: false,
        mesh: { natsUrl: mesh.coordinator.natsUrl, credential: mesh.coordinator.credentials.specialist },
      }),
    ).rejects.toThrow(`${file}:6:49: file 'leak.md' is outside the AFM file's directory`);
  });
});
