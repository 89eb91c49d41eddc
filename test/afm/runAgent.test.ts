// runAgent with the real runtime and a scripted OpenAI-compatible model: a looping model stopped by
// max_iterations (surfaced through webchat), the console chat on piped streams, and the agent as a
// mesh worker answering /v1/chat/completions (openai client), MCP (SDK client), A2A (SDK client)
// and its own /chat.
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createAgentRuntime } from '../../src/afm/runtime/index.js';
import { runtimeResponder } from '../../src/afm/interfaces/runtimeResponder.js';
import { meshTagsFor, runAgent, workerNameFor } from '../../src/apps/afmAgentApp.js';
import { afm, parseSse } from './interfacesKit.js';
import {
  lastToolResult,
  startScriptedOpenAiServer,
  type ScriptStep,
} from '../helpers/scriptedOpenAiServer.js';
import { startTestMesh } from '../helpers/meshFixture.js';
import { Task, TaskState } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { artifactText, textMessage } from '../a2a/a2aTestKit.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function scriptedRuntime(frontMatter: string, script: ScriptStep[], repeatLast = false) {
  const llm = await startScriptedOpenAiServer({ script, repeatLast });
  cleanups.push(() => llm.close());
  const env = { PATH: process.env.PATH, OPENAI_BASE_URL: llm.url, OPENAI_API_KEY: 'sk-test' };
  const definition = afm(`model: { provider: openai, name: scripted }\n${frontMatter}`, env);
  const runtime = await createAgentRuntime(definition, { env });
  cleanups.push(() => runtime.close());
  return { llm, definition, runtime, responder: runtimeResponder(runtime) };
}

const MATH_TOOLS = [
  'tools:',
  '  mcp:',
  '    - name: math',
  '      transport: { type: stdio, command: node, args: [examples/tools/mathServer.mjs] }',
].join('\n');

describe('mesh names and tags', () => {
  it('takes --tags over x-amf.tags over a tag made from the name, and checks them', () => {
    const tagged = afm('name: Code Reviewer\nx-amf: { tags: [review, lint] }');
    const plain = afm('name: Code Reviewer');
    expect(meshTagsFor(tagged, ['cli-tag'])).toEqual(['cli-tag']);
    expect(meshTagsFor(tagged, [])).toEqual(['review', 'lint']);
    expect(meshTagsFor(plain, undefined)).toEqual(['code-reviewer']);
    expect(() => meshTagsFor(plain, ['Not A Tag'])).toThrow(/invalid capability tag "Not A Tag"/);
    expect(workerNameFor('Code Reviewer (v2)')).toBe('Code-Reviewer-v2');
    expect(workerNameFor('日本語')).toBe('afm-agent');
  });
});

describe('max_iterations', () => {
  it('stops a model that never stops calling tools, and webchat says so', async () => {
    const { llm, definition, responder } = await scriptedRuntime(
      `max_iterations: 3\ninterfaces:\n  - type: webchat\n${MATH_TOOLS}`,
      [{ toolCalls: [{ name: 'math__evaluate', arguments: { expression: '1+1' } }] }],
      true,
    );
    const agent = await runAgent({ definition, responder, port: 0, console: false });
    cleanups.push(() => agent.close());
    const res = await fetch(`${agent.url}/chat`, { method: 'POST', body: 'loop forever' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-afm-stop-reason')).toBe('max_iterations');
    expect(await res.text()).toContain('max_iterations');
    // Three rounds of tool calls ran (each with the real tool result), then the loop stopped.
    const toolResults = llm.modelCalls().map((c) => lastToolResult(c));
    expect(toolResults.filter((r) => r === '2').length).toBeGreaterThanOrEqual(3);
    expect(llm.modelCalls().length).toBeLessThanOrEqual(4);
  });
});

describe('webchat streaming with the real runtime', () => {
  it('streams the model text as SSE deltas, in one session across turns', async () => {
    const { llm, definition, responder } = await scriptedRuntime('interfaces:\n  - type: webchat', [
      { text: 'First answer, in pieces.', chunkSize: 3 },
      (req) => ({ text: `History has ${req.body.messages.length} messages.` }),
    ]);
    const agent = await runAgent({ definition, responder, port: 0, console: false });
    cleanups.push(() => agent.close());
    const ask = (text: string) =>
      fetch(`${agent.url}/chat`, {
        method: 'POST',
        body: text,
        headers: { accept: 'text/event-stream', 'x-session-id': 'sse-real' },
      }).then((r) => r.text());
    const events = parseSse(await ask('one'));
    const deltas = events.filter((e) => e.event === 'delta').map((e) => (e.data as { text: string }).text);
    expect(deltas.length).toBeGreaterThan(2);
    expect(deltas.join('')).toBe('First answer, in pieces.');
    expect(events.at(-1)).toMatchObject({ event: 'done', data: { output: 'First answer, in pieces.' } });
    expect(parseSse(await ask('two')).at(-1)).toMatchObject({ data: { output: 'History has 4 messages.' } });
    expect(llm.modelCalls()[0]!.body.stream).toBe(true);
  });
});

describe('a failing model', () => {
  it('gives webchat a 5xx with a message but without the model server details', async () => {
    const { definition, responder } = await scriptedRuntime(
      'interfaces:\n  - type: webchat',
      [{ status: 400, errorMessage: 'model says no' }],
      true,
    );
    const agent = await runAgent({ definition, responder, port: 0, console: false });
    cleanups.push(() => agent.close());
    const res = await fetch(`${agent.url}/chat`, { method: 'POST', body: 'hello' });
    expect(res.status).toBeGreaterThanOrEqual(500);
    const body = (await res.json()) as { error: Record<string, unknown> };
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message']);
    expect(body.error.message).toBe(
      "the agent's model (openai) failed (HTTP 400); details are in the agent's log",
    );
  });
});

describe('console chat', () => {
  it('answers piped lines with streamed text, keeps one session, and ends at /exit', async () => {
    const { llm, definition, responder } = await scriptedRuntime('', [
      { text: 'Hello there, student.' },
      (req) => ({ text: `You said ${req.body.messages.length} things so far.` }),
    ]);
    const input = new PassThrough();
    const output = new PassThrough();
    let printed = '';
    output.on('data', (c: Buffer) => (printed += c.toString()));
    const agent = await runAgent({
      definition,
      responder,
      console: true,
      consoleStreams: { input, output, interactive: false },
    });
    cleanups.push(() => agent.close());
    expect(agent.url).toBeUndefined(); // consolechat only: no HTTP server
    input.write('hi\nhow many?\n/exit\nnever read\n');
    await agent.consoleDone;
    expect(printed).toBe('Hello there, student.\nYou said 4 things so far.\n');
    expect(llm.modelCalls()).toHaveLength(2); // the line after /exit was not sent
  });
});

describe('as a mesh worker', () => {
  it('answers amf/<tag> chat completions, MCP with its signature as the tool, A2A, and serves /chat', async () => {
    const mesh = await startTestMesh();
    cleanups.push(() => mesh.close());
    const { definition, responder } = await scriptedRuntime(
      [
        'name: Unit Converter',
        'interfaces:',
        '  - type: webchat',
        '    signature:',
        '      input: { type: object, properties: { value: { type: number }, unit: { type: string } }, required: [value, unit] }',
        '      output: { type: object, properties: { result: { type: string } }, required: [result] }',
        'x-amf: { tags: [convert], tool_alias: conv }',
      ].join('\n'),
      [
        { text: '{"result": "1 km = 1000 m"}' },
        { text: '{"result": "2 km = 2000 m"}' },
        { text: '{"result": "3 km = 3000 m"}' },
      ],
    );
    const agent = await runAgent({
      definition,
      responder,
      port: 0,
      console: false,
      mesh: {
        natsUrl: mesh.coordinator.natsUrl,
        credential: mesh.coordinator.credentials.specialist,
        heartbeatSeconds: 1,
      },
    });
    cleanups.push(() => agent.close());
    expect(agent.tags).toEqual(['convert']);
    const agentId = agent.worker!.worker.agentId;
    await mesh.waitFor(() => mesh.coordinator.registry.isLive(agentId), 10_000, 'AFM agent admitted');

    const openai = new OpenAI({ baseURL: `${mesh.url}/v1`, apiKey: 'unused' });
    const completion = await openai.chat.completions.create({
      model: 'amf/convert',
      messages: [{ role: 'user', content: JSON.stringify({ value: 1, unit: 'km' }) }],
    });
    expect(JSON.parse(completion.choices[0]!.message.content!)).toEqual({ result: '1 km = 1000 m' });

    const mcp = new Client({ name: 'test', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${agent.url}/mcp`)));
    cleanups.push(() => mcp.close());
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name)).toEqual(['Unit-Converter']);
    expect(tools[0]!.inputSchema).toMatchObject({ type: 'object', required: ['value', 'unit'] });
    const called = await mcp.callTool({ name: 'Unit-Converter', arguments: { value: 2, unit: 'km' } });
    expect(JSON.stringify(called.content)).toContain('2 km = 2000 m');

    // A2A comes with the worker: the official SDK client talks to the AFM agent directly.
    const a2a = await new ClientFactory().createFromUrl(agent.url!);
    const task = (await a2a.sendMessage(textMessage(JSON.stringify({ value: 3, unit: 'km' })))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(JSON.parse(artifactText(task))).toEqual({ result: '3 km = 3000 m' });

    // The AFM interfaces live on the worker's own server, next to its agent card.
    const info = (await (await fetch(`${agent.url}/`)).json()) as {
      mesh: { agent_id: string };
      tags: string[];
    };
    expect(info).toMatchObject({ mesh: { agent_id: agentId }, tags: ['convert'] });
    const card = (await (await fetch(`${agent.url}/.well-known/agent-card.json`)).json()) as Record<
      string,
      unknown
    >;
    expect(card).toMatchObject({ name: 'Unit-Converter' });
    const bad = await fetch(`${agent.url}/chat`, {
      method: 'POST',
      body: 'not json',
      headers: { 'content-type': 'text/plain' },
    });
    expect(bad.status).toBe(400);
  });
});
