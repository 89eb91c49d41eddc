// The MCP Inspector's CLI mode (`@modelcontextprotocol/inspector-cli`, the `--cli` of the
// Inspector), run as its users run it, one process per call, against the three MCP servers AMF
// offers: the coordinator's federated `/mcp`, a worker's own `/mcp` (with the operator key, as
// worker edges require), and `amf mcp` over stdio. Each answers tools/list, a tools/call of the
// echo tool, resources/list and prompts/list with what the agents serve.
// dist/ must be current for the stdio row: scripts/test.sh builds first; by hand, `npm run build`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
// @ts-expect-error: an example handler module without types
import conformanceHandler from '../fixtures/mcpConformanceBase.mjs';

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const AMF_BIN = join(ROOT, 'bin/amf.js');
const INSPECTOR = join(ROOT, 'node_modules/@modelcontextprotocol/inspector-cli/build/cli.js');

let mesh: TestMesh;
let echoWorkerUrl: string;
let fxWorkerUrl: string;

beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist/cli/main.js')))
    throw new Error('dist/ is missing: run `npm run build` (scripts/test.sh builds first)');
  mesh = await startTestMesh();
  echoWorkerUrl = (await mesh.startWorker('insp-echo', ['echo'], echoHandler)).url;
  fxWorkerUrl = (await mesh.startWorker('insp-fx', ['fx'], conformanceHandler as WorkerHandler)).url;
}, 60_000);

afterAll(async () => {
  await mesh?.close();
});

/** How the Inspector reaches one server: its target arguments (URL or command) and options. */
type Target = () => string[];

const http =
  (url: () => string, withKey: boolean): Target =>
  () => [
    url(),
    '--transport',
    'http',
    ...(withKey ? ['--header', `Authorization: Bearer ${mesh.operatorKey}`] : []),
  ];

/**
 * `amf mcp` as an IDE config names it (the coordinator from AMF_COORDINATOR_URL); the Inspector
 * starts it over stdio and hands it its own environment.
 */
const stdio: Target = () => [process.execPath, AMF_BIN, 'mcp'];

/** Runs `mcp-inspector-cli --cli <target> --method …` and parses the JSON it prints. */
async function inspect(target: Target, method: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await run(process.execPath, [INSPECTOR, '--cli', ...target(), '--method', ...method], {
    // The Inspector finds its own package.json for its client name through `../package.json` checked
    // against the working directory but imported beside its module: it works from a directory whose
    // parent holds a package.json (a project's subfolder), so it runs from its own build folder.
    cwd: dirname(INSPECTOR),
    env: {
      ...process.env,
      AMF_COORDINATOR_URL: mesh.url,
      AMF_DATA_DIR: join(tmpdir(), 'amf-inspector-test'),
    },
    maxBuffer: 8 * 1024 * 1024,
  });
  return JSON.parse(stdout.slice(stdout.indexOf('{'))) as Record<string, unknown>;
}

const names = (list: unknown): string[] => (list as { name: string }[]).map((x) => x.name);

describe.each([
  {
    server: "the coordinator's /mcp",
    tools: http(() => `${mesh.url}/mcp`, false),
    more: http(() => `${mesh.url}/mcp`, false),
    echo: 'insp-echo__echo',
    resource: 'amf://insp-fx/test://static-text',
    prompt: 'insp-fx__test_simple_prompt',
  },
  {
    server: "a worker's /mcp",
    tools: http(() => `${echoWorkerUrl}/mcp`, true),
    more: http(() => `${fxWorkerUrl}/mcp`, true),
    echo: 'echo',
    resource: 'test://static-text',
    prompt: 'test_simple_prompt',
  },
  {
    server: 'amf mcp (stdio)',
    tools: stdio,
    more: stdio,
    echo: 'insp-echo__echo',
    resource: 'amf://insp-fx/test://static-text',
    prompt: 'insp-fx__test_simple_prompt',
  },
])('MCP Inspector CLI against $server', ({ tools, more, echo, resource, prompt }) => {
  it('lists the tools, the echo tool among them', async () => {
    const listed = await inspect(tools, ['tools/list']);
    expect(names(listed.tools)).toContain(echo);
  });

  it('calls the echo tool', async () => {
    const result = await inspect(tools, [
      'tools/call',
      '--tool-name',
      echo,
      '--tool-arg',
      'text=through the inspector',
    ]);
    expect(result.isError).toBeFalsy();
    const text = (result.content as { type: string; text?: string }[]).map((c) => c.text ?? '').join('');
    expect(text).toContain('through the inspector');
  });

  it('lists the resources', async () => {
    const listed = await inspect(more, ['resources/list']);
    expect((listed.resources as { uri: string }[]).map((r) => r.uri)).toContain(resource);
  });

  it('lists the prompts', async () => {
    const listed = await inspect(more, ['prompts/list']);
    expect(names(listed.prompts)).toContain(prompt);
  });
});
