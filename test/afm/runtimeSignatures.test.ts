// Signatures at run time against scripted model servers: input checked before any model call,
// structured output requested (response_format for OpenAI-compatible, system-prompt instruction for
// both), validated, repaired once with the validation errors, then a clear error.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAgentRuntime,
  type AgentDefinitionInput,
  type AgentRuntime,
} from '../../src/afm/runtime/index.js';
import { extractJson } from '../../src/afm/runtime/outputContract.js';
import { AmfError } from '../../src/errors.js';
import { startScriptedAnthropicServer } from '../helpers/scriptedAnthropicServer.js';
import { startScriptedOpenAiServer } from '../helpers/scriptedOpenAiServer.js';
import type { ScriptedServer } from '../helpers/scriptedServerBase.js';

const ENV = { AMF_LLM_MAX_RETRIES: '0' };
const REVIEW = {
  type: 'object',
  properties: {
    verdict: { type: 'string', enum: ['approve', 'reject'] },
    score: { type: 'number', minimum: 0, maximum: 1 },
  },
  required: ['verdict', 'score'],
};
const QUESTION = {
  type: 'object',
  properties: { question: { type: 'string' }, level: { type: 'integer' } },
  required: ['question'],
};

function definition(url: string, provider = 'openai-compatible'): AgentDefinitionInput {
  return {
    name: 'reviewer',
    role: 'You review things.',
    instructions: 'Judge strictly.',
    model: { provider, url, name: 'judge' },
    max_iterations: 5,
    interfaces: [{ signature: { input: QUESTION, output: REVIEW } }],
  };
}

async function rejection(p: Promise<unknown>): Promise<AmfError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AmfError);
  return err as AmfError;
}

describe('signatures with an OpenAI-compatible model', () => {
  let llm: ScriptedServer;
  let agent: AgentRuntime;

  beforeAll(async () => {
    llm = await startScriptedOpenAiServer();
    agent = await createAgentRuntime(definition(llm.url), { env: ENV });
  });
  afterAll(async () => {
    await agent.close();
    await llm.close();
  });

  it('refuses input that does not match signature.input, before any model call', async () => {
    const before = llm.modelCalls().length;
    const err = await rejection(agent.respond({ input: { question: 42 } }));
    expect(err.code).toBe('INVALID_REQUEST');
    expect(err.message).toContain("input does not match the agent's input signature");
    expect(err.message).toContain('/question must be string');
    const missing = await rejection(agent.respond({ input: 'a bare string' }));
    expect(missing.message).toContain('must be object');
    expect(llm.modelCalls()).toHaveLength(before);
  });

  it('sends structured input as JSON, asks for the output schema and accepts a valid answer', async () => {
    llm.push({ text: '{"verdict":"approve","score":0.9}' });
    const reply = await agent.respond({ input: { question: 'Is this fine?', level: 2 } });
    expect(reply.output).toEqual({ verdict: 'approve', score: 0.9 });
    expect(reply.text).toBe('{"verdict":"approve","score":0.9}');
    const body = llm.modelCalls().at(-1)!.body;
    expect(JSON.parse(body.messages.at(-1).content)).toEqual({ question: 'Is this fine?', level: 2 });
    expect(body.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'agent_output', schema: REVIEW, strict: false },
    });
    expect(body.messages[0].content).toContain('# Output format');
    expect(body.messages[0].content).toContain('"enum": [');
  });

  it('repairs an invalid answer once, telling the model what was wrong', async () => {
    llm.push({ text: 'I think it is good, score 0.8' }, { text: '{"verdict":"approve","score":0.8}' });
    const reply = await agent.respond({ sessionId: 'repair', input: { question: 'ok?' } });
    expect(reply.output).toEqual({ verdict: 'approve', score: 0.8 });
    const repair = llm.modelCalls().at(-1)!.body;
    expect(repair.messages.at(-2)).toEqual({ role: 'assistant', content: 'I think it is good, score 0.8' });
    expect(repair.messages.at(-1).role).toBe('user');
    expect(repair.messages.at(-1).content).toContain('not JSON');
  });

  it('shows schema errors in the repair request', async () => {
    llm.push(
      { text: '{"verdict":"maybe","score":3}' },
      { text: '```json\n{"verdict":"reject","score":0}\n```' },
    );
    const reply = await agent.respond({ sessionId: 'schema-repair', input: { question: 'ok?' } });
    expect(reply.output).toEqual({ verdict: 'reject', score: 0 });
    const repair = llm.modelCalls().at(-1)!.body.messages.at(-1).content as string;
    expect(repair).toContain('/verdict must be equal to one of the allowed values');
    expect(repair).toContain('/score must be <= 1');
  });

  it('fails clearly when the answer is still invalid after the repair', async () => {
    llm.push({ text: '{"verdict":"maybe"}' }, { text: '{"verdict":"perhaps"}' });
    const err = await rejection(agent.respond({ sessionId: 'hopeless', input: { question: 'ok?' } }));
    expect(err.code).toBe('TASK_FAILED');
    expect(err.message).toContain('does not match the output signature, also after one repair attempt');
    expect(err.message).toContain("must have required property 'score'");
  });

  it('wraps a non-object output schema as {"value": ...} and accepts either form back', async () => {
    const list = { type: 'array', items: { type: 'string' }, minItems: 1 };
    llm.push({ text: '{"value":["a","b"]}' }, { text: '["c"]' });
    const signature = { input: { type: 'string' }, output: list };
    const wrapped = await agent.respond({ sessionId: 'list1', input: 'list two', signature });
    expect(wrapped.output).toEqual(['a', 'b']);
    expect(llm.modelCalls().at(-1)!.body.response_format.json_schema.schema).toEqual({
      type: 'object',
      properties: { value: list },
      required: ['value'],
      additionalProperties: false,
    });
    const bare = await agent.respond({ sessionId: 'list2', input: 'list one', signature });
    expect(bare.output).toEqual(['c']);
  });

  it('uses a per-call string signature: plain text out, no response_format', async () => {
    llm.push({ text: 'just words' });
    const reply = await agent.respond({
      input: 'hi',
      signature: { input: { type: 'string' }, output: { type: 'string' } },
    });
    expect(reply.output).toBe('just words');
    expect(llm.modelCalls().at(-1)!.body.response_format).toBeUndefined();
  });

  it('does not stream a structured answer before it is validated', async () => {
    llm.push({ text: '{"verdict":"approve","score":1}' });
    const deltas: string[] = [];
    const reply = await agent.respond({
      sessionId: 'nostream',
      input: { question: 'q' },
      onDelta: (d) => deltas.push(d),
    });
    expect(reply.output).toEqual({ verdict: 'approve', score: 1 });
    expect(deltas).toEqual([]);
    expect(llm.modelCalls().at(-1)!.body.stream).not.toBe(true);
  });

  it('fails a structured turn that hits max_iterations', async () => {
    const looping = await startScriptedOpenAiServer({
      script: [{ toolCalls: [{ name: 'nothing__here', arguments: {} }] }],
      repeatLast: true,
    });
    const limited = await createAgentRuntime({ ...definition(looping.url), max_iterations: 1 }, { env: ENV });
    try {
      const err = await rejection(limited.respond({ input: { question: 'q' } }));
      expect(err.code).toBe('TASK_FAILED');
      expect(err.message).toContain('max_iterations (1 tool-call rounds)');
    } finally {
      await limited.close();
      await looping.close();
    }
  });
});

describe('signatures with an Anthropic model', () => {
  let llm: ScriptedServer;
  let agent: AgentRuntime;

  beforeAll(async () => {
    llm = await startScriptedAnthropicServer();
    agent = await createAgentRuntime(definition(llm.url, 'anthropic'), { env: ENV });
  });
  afterAll(async () => {
    await agent.close();
    await llm.close();
  });

  it('asks for the schema in the system prompt and accepts a fenced JSON answer', async () => {
    llm.push({ text: 'Here you go:\n```json\n{"verdict":"reject","score":0.1}\n```' });
    const reply = await agent.respond({ input: { question: 'q' } });
    expect(reply.output).toEqual({ verdict: 'reject', score: 0.1 });
    const body = llm.modelCalls().at(-1)!.body;
    expect(body.system).toContain('# Role\nYou review things.');
    expect(body.system).toContain('validates against this JSON Schema');
    expect(body.system).toContain('"required": [\n    "verdict",\n    "score"\n  ]');
  });

  it('repairs over the Messages protocol with alternating turns', async () => {
    llm.push({ text: 'no json here' }, { text: '{"verdict":"approve","score":0.5}' });
    const reply = await agent.respond({ sessionId: 'a-repair', input: { question: 'q' } });
    expect(reply.output).toEqual({ verdict: 'approve', score: 0.5 });
    const roles = llm
      .modelCalls()
      .at(-1)!
      .body.messages.map((m: { role: string }) => m.role);
    expect(roles).toEqual(['user', 'assistant', 'user']);
  });
});

describe('extractJson', () => {
  it('finds JSON bare, fenced or inside prose, and says why it failed otherwise', () => {
    expect(extractJson(' {"a":1} ')).toEqual({ ok: true, value: { a: 1 } });
    expect(extractJson('```\n[1,2]\n```')).toEqual({ ok: true, value: [1, 2] });
    expect(extractJson('The result is {"a": {"b": 2}} as asked.')).toEqual({
      ok: true,
      value: { a: { b: 2 } },
    });
    expect(extractJson('')).toEqual({ ok: false, reason: 'the answer is empty' });
    const bad = extractJson('{"a": }');
    expect(bad.ok).toBe(false);
  });
});
