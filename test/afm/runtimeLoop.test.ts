// The AFM agent loop end to end: a definition's model is a scripted OpenAI or Anthropic server (the
// only test double), its tools a real stdio MCP server started through the MCP client hub with the
// definition's allow/deny filter. Asserts what the agent sent (system prompt, tools, tool results),
// what it answered, max_iterations, sessions and failures.
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAgentRuntime,
  type AgentDefinitionInput,
  type AgentEvent,
} from '../../src/afm/runtime/index.js';
import type { AfmDefinition } from '../../src/afm/types.js';
import { ModelProviderError } from '../../src/llm/index.js';
import {
  lastToolResult as lastAnthropicToolResult,
  startScriptedAnthropicServer,
} from '../helpers/scriptedAnthropicServer.js';
import { lastToolResult, startScriptedOpenAiServer } from '../helpers/scriptedOpenAiServer.js';
import type { ScriptedServer } from '../helpers/scriptedServerBase.js';

const STDIO_FIXTURE = fileURLToPath(new URL('../fixtures/mcpStdioServer.mjs', import.meta.url));
const ENV = { PATH: process.env.PATH, AMF_LLM_MAX_RETRIES: '0' };

// A full AFM definition must be usable where the runtime's input is expected.
const acceptsAfmDefinitions = (def: AfmDefinition): AgentDefinitionInput => def;
void acceptsAfmDefinitions;

function definition(
  model: AgentDefinitionInput['model'],
  extra: Partial<AgentDefinitionInput> = {},
): AgentDefinitionInput {
  return {
    name: 'helper',
    role: 'You help with tests.',
    instructions: 'Use the tools when asked.\nBe brief.',
    model,
    max_iterations: 10,
    tools: {
      mcp: [
        {
          name: 'fixture',
          transport: { type: 'stdio', command: process.execPath, args: [STDIO_FIXTURE], env: {} },
          tool_filter: { allow: ['echo', 'fail', 'env', 'slow'], deny: ['fail'] },
        },
      ],
    },
    ...extra,
  };
}

describe('agent loop with an OpenAI-compatible model and a stdio MCP server', () => {
  let llm: ScriptedServer;
  let runtime: Awaited<ReturnType<typeof createAgentRuntime>>;

  beforeAll(async () => {
    llm = await startScriptedOpenAiServer({ apiKey: 'sk-loop' });
    runtime = await createAgentRuntime(
      definition({
        provider: 'openai',
        url: llm.url,
        name: 'gpt-test',
        authentication: { type: 'api-key', api_key: 'sk-loop' },
      }),
      { env: ENV },
    );
  });
  afterAll(async () => {
    await runtime.close();
    await llm.close();
  });

  it('sends Role and Instructions as the system prompt and only the filtered, namespaced tools', async () => {
    llm.push({ text: 'hi!' });
    const reply = await runtime.respond({ sessionId: 'prompt', input: 'hello' });
    expect(reply).toMatchObject({ output: 'hi!', text: 'hi!', iterations: 0 });
    const body = llm.modelCalls().at(-1)!.body;
    expect(body.messages[0]).toEqual({
      role: 'system',
      content: '# Role\nYou help with tests.\n\n# Instructions\nUse the tools when asked.\nBe brief.',
    });
    expect(body.messages[1]).toEqual({ role: 'user', content: 'hello' });
    expect(runtime.toolFailures).toEqual([]);
    const names = body.tools.map((t: { function: { name: string } }) => t.function.name).sort();
    // allow lists echo, fail, env, slow; deny removes fail; big/flood were never allowed.
    expect(names).toEqual(['fixture__echo', 'fixture__env', 'fixture__slow']);
    const echo = body.tools.find((t: { function: { name: string } }) => t.function.name === 'fixture__echo');
    expect(echo.function).toMatchObject({
      description: 'returns its text',
      parameters: { type: 'object', properties: { text: { type: 'string' } } },
    });
  });

  it('runs a tool call on the real MCP server, feeds the result back and streams the answer', async () => {
    llm.push(
      { toolCalls: [{ id: 'call_echo', name: 'fixture__echo', arguments: { text: 'ping from the tool' } }] },
      (req) => ({ text: `The tool said: ${lastToolResult(req)}`, chunkSize: 3 }),
    );
    const deltas: string[] = [];
    const events: AgentEvent[] = [];
    const reply = await runtime.respond({
      sessionId: 'tools',
      input: 'echo something',
      onDelta: (d) => deltas.push(d),
      onEvent: (e) => events.push(e),
    });
    expect(reply).toMatchObject({ text: 'The tool said: ping from the tool', iterations: 1 });
    expect(reply.stopReason).toBeUndefined();
    expect(deltas.join('')).toBe('The tool said: ping from the tool');
    expect(deltas.length).toBeGreaterThan(3);
    const second = llm.modelCalls().at(-1)!.body.messages;
    expect(second.at(-2)).toMatchObject({
      role: 'assistant',
      tool_calls: [{ id: 'call_echo', function: { name: 'fixture__echo' } }],
    });
    expect(second.at(-1)).toEqual({ role: 'tool', tool_call_id: 'call_echo', content: 'ping from the tool' });
    expect(events.map((e) => e.type)).toEqual(['tool_call', 'tool_result']);
  });

  it('tells the model about a denied tool, broken arguments and a tool error, and carries on', async () => {
    llm.push(
      {
        toolCalls: [
          { id: 'a', name: 'fixture__fail', arguments: {} },
          { id: 'b', name: 'fixture__echo', arguments: '{"text": ' },
          { id: 'c', name: 'fixture__slow', arguments: { ms: 'not a number' } },
        ],
      },
      { text: 'recovered' },
    );
    const reply = await runtime.respond({ sessionId: 'errors', input: 'try things' });
    expect(reply.text).toBe('recovered');
    const tools = llm
      .modelCalls()
      .at(-1)!
      .body.messages.filter((m: { role: string }) => m.role === 'tool');
    expect(tools).toHaveLength(3);
    expect(tools[0].content).toMatch(/no tool "fixture__fail".*known: .*fixture__echo/);
    expect(tools[1].content).toContain('not valid JSON');
    expect(tools[2].content).toMatch(/ms/); // the MCP server's own validation error, passed on
  });

  it('stops a looping agent at max_iterations and says so in the answer', async () => {
    const looping = await startScriptedOpenAiServer({
      script: [
        { text: 'checking again', toolCalls: [{ name: 'fixture__echo', arguments: { text: 'again' } }] },
      ],
      repeatLast: true,
    });
    const limited = await createAgentRuntime(
      definition({ provider: 'openai-compatible', url: looping.url, name: 'loop' }, { max_iterations: 3 }),
      { env: ENV },
    );
    try {
      const deltas: string[] = [];
      const reply = await limited.respond({ input: 'loop forever', onDelta: (d) => deltas.push(d) });
      expect(reply.stopReason).toBe('max_iterations');
      expect(reply.iterations).toBe(3);
      expect(reply.text).toContain('limit of 3 tool-call rounds (max_iterations)');
      // Everything the model said is kept, one paragraph per round, then the notice.
      expect(
        reply.text.startsWith(
          'checking again\n\nchecking again\n\nchecking again\n\nchecking again\n\n[Stopped',
        ),
      ).toBe(true);
      expect(deltas.join('')).toBe(reply.text);
      // Three rounds ran (three tool results went back), then the fourth request for tools was refused.
      expect(looping.modelCalls()).toHaveLength(4);
      const last = looping.modelCalls().at(-1)!.body.messages;
      expect(last.filter((m: { role: string }) => m.role === 'tool')).toHaveLength(3);
    } finally {
      await limited.close();
      await looping.close();
    }
  });

  it('keeps history per session: user messages and answers, not tool traffic', async () => {
    llm.push({ text: 'first answer' }, { text: 'second answer' }, { text: 'other session' });
    await runtime.respond({ sessionId: 'alice', input: 'first question' });
    await runtime.respond({ sessionId: 'alice', input: 'second question' });
    const alice = llm.modelCalls().at(-1)!.body.messages.slice(1);
    expect(alice).toEqual([
      { role: 'user', content: 'first question' },
      { role: 'assistant', content: 'first answer' },
      { role: 'user', content: 'second question' },
    ]);
    await runtime.respond({ sessionId: 'bob', input: 'hello' });
    expect(llm.modelCalls().at(-1)!.body.messages.slice(1)).toEqual([{ role: 'user', content: 'hello' }]);
    runtime.endSession('alice');
    llm.push({ text: 'fresh' });
    await runtime.respond({ sessionId: 'alice', input: 'again' });
    expect(llm.modelCalls().at(-1)!.body.messages.slice(1)).toEqual([{ role: 'user', content: 'again' }]);
  });

  it('runs the turns of one session in order even when they arrive together', async () => {
    llm.push({ text: 'one' }, { text: 'two' });
    const [a, b] = await Promise.all([
      runtime.respond({ sessionId: 'burst', input: 'q1' }),
      runtime.respond({ sessionId: 'burst', input: 'q2' }),
    ]);
    expect([a.text, b.text]).toEqual(['one', 'two']);
    expect(llm.modelCalls().at(-1)!.body.messages.slice(1)).toEqual([
      { role: 'user', content: 'q1' },
      { role: 'assistant', content: 'one' },
      { role: 'user', content: 'q2' },
    ]);
  });

  it('surfaces a provider refusal (401) with provider, URL and status', async () => {
    const wrongKey = await createAgentRuntime(
      definition(
        {
          provider: 'openai',
          url: llm.url,
          name: 'gpt-test',
          authentication: { type: 'bearer', token: 'nope' },
        },
        {
          tools: { mcp: [] },
        },
      ),
      { env: ENV },
    );
    const err = (await wrongKey.respond({ input: 'hi' }).catch((e: unknown) => e)) as ModelProviderError;
    expect(err).toBeInstanceOf(ModelProviderError);
    expect(err).toMatchObject({ code: 'UNAUTHORIZED', status: 401, provider: 'openai', url: llm.url });
    await wrongKey.close();
  });

  it('cancels a turn while a tool runs', async () => {
    llm.push(
      { toolCalls: [{ name: 'fixture__slow', arguments: { ms: 20_000 } }] },
      { text: 'never asked for' },
    );
    const controller = new AbortController();
    let callsAtCancel = -1;
    const pending = runtime.respond({
      sessionId: 'cancel',
      input: 'be slow',
      signal: controller.signal,
      onEvent: (e) => {
        if (e.type !== 'tool_call') return;
        callsAtCancel = llm.modelCalls().length;
        controller.abort();
      },
    });
    await expect(pending).rejects.toThrow('agent turn cancelled while tool "fixture__slow" ran');
    // No model call was made after the cancel; the scripted answer is still waiting.
    expect(llm.modelCalls()).toHaveLength(callsAtCancel);
    const leftover = await runtime.respond({ sessionId: 'after-cancel', input: 'still there?' });
    expect(leftover.text).toBe('never asked for');
  });
});

describe('agent loop with an Anthropic model', () => {
  let llm: ScriptedServer;

  beforeAll(async () => {
    llm = await startScriptedAnthropicServer({ apiKey: 'sk-ant' });
  });
  afterAll(() => llm.close());

  it('runs tools streamed over the Messages protocol and feeds tool_result blocks back', async () => {
    const runtime = await createAgentRuntime(
      definition({
        provider: 'anthropic',
        url: llm.url,
        name: 'claude-test',
        authentication: { type: 'api-key', api_key: 'sk-ant' },
      }),
      { env: ENV },
    );
    try {
      llm.push(
        {
          text: 'Let me check.',
          toolCalls: [{ id: 'toolu_1', name: 'fixture__echo', arguments: { text: 'from mcp' } }],
        },
        (req) => ({ text: `Done: ${lastAnthropicToolResult(req)}` }),
      );
      const deltas: string[] = [];
      const reply = await runtime.respond({ input: 'go', onDelta: (d) => deltas.push(d) });
      expect(reply).toMatchObject({ text: 'Let me check.\n\nDone: from mcp', iterations: 1 });
      expect(deltas.join('')).toBe(reply.text);
      const [first, second] = llm.modelCalls();
      expect(first!.body.system).toBe(
        '# Role\nYou help with tests.\n\n# Instructions\nUse the tools when asked.\nBe brief.',
      );
      expect(first!.body.tools.map((t: { name: string }) => t.name).sort()).toEqual([
        'fixture__echo',
        'fixture__env',
        'fixture__slow',
      ]);
      expect(second!.body.messages).toEqual([
        { role: 'user', content: [{ type: 'text', text: 'go' }] },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Let me check.' },
            { type: 'tool_use', id: 'toolu_1', name: 'fixture__echo', input: { text: 'from mcp' } },
          ],
        },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'from mcp', is_error: false }],
        },
      ]);
    } finally {
      await runtime.close();
    }
  });
});
