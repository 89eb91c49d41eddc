// Every example agent in examples/ validates, loads, and answers one real request through its own
// interface: the real parser, runtime, MCP tool servers (stdio child processes) and HTTP interfaces;
// only the hosted model is replaced by the scripted OpenAI-compatible server.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadAfmFile, validateAfmFile } from '../../src/afm/index.js';
import { createAgentRuntime, type AgentRuntime } from '../../src/afm/runtime/index.js';
import { runtimeResponder } from '../../src/afm/interfaces/runtimeResponder.js';
import { runAgent, type RunningAgent } from '../../src/apps/afmAgentApp.js';
import { signBody } from '../../src/afm/interfaces/webhookSignature.js';
import {
  lastToolResult,
  startScriptedOpenAiServer,
  type ScriptedServer,
  type ScriptStep,
} from '../helpers/scriptedOpenAiServer.js';

const EXAMPLES = join(import.meta.dirname, '../../examples');
const SECRET = 'triage-secret';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Starts an example with a scripted model; stdio tool servers start from the repository root. */
async function startExample(
  file: string,
  script: ScriptStep[],
): Promise<{ agent: RunningAgent & { url: string }; llm: ScriptedServer; runtime: AgentRuntime }> {
  const llm = await startScriptedOpenAiServer({ script, apiKey: 'sk-test' });
  cleanups.push(() => llm.close());
  const env = {
    PATH: process.env.PATH,
    OPENAI_BASE_URL: llm.url,
    OPENAI_API_KEY: 'sk-test',
    TRIAGE_WEBHOOK_SECRET: SECRET,
  };
  const definition = await loadAfmFile(join(EXAMPLES, file), { env });
  const runtime = await createAgentRuntime(definition, { env });
  cleanups.push(() => runtime.close());
  const agent = await runAgent({ definition, responder: runtimeResponder(runtime), port: 0, console: false });
  cleanups.push(() => agent.close());
  return { agent: agent as RunningAgent & { url: string }, llm, runtime };
}

describe('examples/', () => {
  it('holds at least four agents, each valid for amf validate', async () => {
    const files = (await readdir(EXAMPLES)).filter((f) => f.endsWith('.afm.md'));
    expect(files.length).toBeGreaterThanOrEqual(4);
    for (const f of files) {
      const { problems, definition } = await validateAfmFile(join(EXAMPLES, f), { env: {} });
      expect(
        problems.filter((p) => p.severity === 'error'),
        f,
      ).toEqual([]);
      expect(definition?.role, f).not.toBe('');
      expect(definition?.instructions, f).not.toBe('');
      expect(definition?.['x-amf'].tags.length, f).toBeGreaterThan(0);
    }
  });

  it('code-reviewer reads a file through the filesystem MCP server and reviews it', async () => {
    const { agent, llm, runtime } = await startExample('code-reviewer.afm.md', [
      { toolCalls: [{ name: 'fs__read_file', arguments: { path: 'tools/mathServer.mjs' } }] },
      (req) => ({
        text: `Review: line 1 is \`${(lastToolResult(req) ?? '').split('\n')[0]!.trim()}\`; looks fine.`,
      }),
    ]);
    expect(
      runtime.tools
        .listTools()
        .map((t) => t.name)
        .sort(),
    ).toEqual(['fs__list_directory', 'fs__read_file', 'fs__search_text']);
    const res = await fetch(`${agent.url}/chat`, { method: 'POST', body: 'Review tools/mathServer.mjs' });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('Review: line 1 is `1  #!/usr/bin/env node`; looks fine.');
    // The system prompt came from the file's Role and Instructions.
    expect(llm.modelCalls()[0]!.body.messages[0].content).toContain('You are a careful senior engineer');
  });

  it('summarizer answers text with the structured summary of its signature', async () => {
    const summary = { title: 'Mesh basics', summary: 'AMF joins agents.', key_points: ['local-first'] };
    const { agent } = await startExample('summarizer.afm.md', [{ text: JSON.stringify(summary) }]);
    const res = await fetch(`${agent.url}/summarize`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'AMF lets many AI agents on one machine work as one mesh.',
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(summary);
  });

  it('webhook-triage verifies the signature and answers a GitHub issue event with its triage', async () => {
    const triage = { severity: 'high', component: 'auth', labels: ['bug', 'login'], summary: 'Login fails' };
    const { agent, llm } = await startExample('webhook-triage.afm.md', [{ text: JSON.stringify(triage) }]);
    const payload = JSON.stringify({
      action: 'opened',
      repository: { full_name: 'acme/app' },
      issue: {
        number: 7,
        title: 'Cannot log in',
        body: 'The login button does nothing.',
        user: { login: 'sam' },
      },
    });
    const unsigned = await fetch(`${agent.url}/github`, { method: 'POST', body: payload });
    expect(unsigned.status).toBe(401);
    const res = await fetch(`${agent.url}/github`, {
      method: 'POST',
      body: payload,
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'issues',
        'x-hub-signature-256': signBody(SECRET, payload),
      },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(triage);
    const prompt = llm.modelCalls()[0]!.body.messages.at(-1).content as string;
    expect(prompt).toContain('GitHub sent a "issues" event (action: opened)');
    expect(prompt).toContain('Issue #7: Cannot log in');
    expect(prompt).toContain('Opened by: sam');
  });

  it('math-tutor checks its arithmetic with the math tools server', async () => {
    const { agent } = await startExample('math-tutor.afm.md', [
      { toolCalls: [{ name: 'math__evaluate', arguments: { expression: '12 * (3 + 4)' } }] },
      (req) => ({ text: `1. Add 3 and 4.\n2. Multiply by 12.\nAnswer: ${lastToolResult(req)}` }),
    ]);
    const res = await fetch(`${agent.url}/tutor`, {
      method: 'POST',
      body: 'What is 12 times (3 + 4)?',
      headers: { 'x-session-id': 'kid1' },
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('1. Add 3 and 4.\n2. Multiply by 12.\nAnswer: 84');
  });
});
