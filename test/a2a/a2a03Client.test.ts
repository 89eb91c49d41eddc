/**
 * A2A 0.3 clients stay first-class (issue 30): a client of the 0.3 line (pip a2a-sdk 0.3.x, in the
 * venv `scripts/test.sh` makes, AMF_TEST_PYTHON_A2A03) against the coordinator of a mesh of two
 * agents, as a plain client: it discovers the coordinator from `/.well-known/agent-card.json` (the
 * union card), then sends, streams, gets, answers an input request over a stream, cancels and
 * resubscribes, over JSON-RPC and HTTP+JSON.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const SCRIPT = fileURLToPath(new URL('./python_a2a03_client.py', import.meta.url));
const VENV_PYTHON = fileURLToPath(new URL('../../.cache/python-venv-a2a03/bin/python', import.meta.url));
/** The 0.3 client's interpreter: scripts/test.sh exports it; a developer's run finds the venv. */
const PYTHON = process.env.AMF_TEST_PYTHON_A2A03 ?? (existsSync(VENV_PYTHON) ? VENV_PYTHON : undefined);

/** What it does is chosen by the text: ask for input, hold until cancelled, take a while, or echo. */
const steps: WorkerHandler = {
  name: 'steps',
  description: 'Task lifecycles for the A2A 0.3 client test',
  handle: async (ctx) => {
    switch (ctx.text) {
      case 'ask':
        return `colour ${(await ctx.requestInput('what colour?')).text}`;
      case 'wait':
        return new Promise<string>((_resolve, reject) =>
          ctx.signal.addEventListener('abort', () => reject(new Error('cancelled'))),
        );
      case 'slow':
        ctx.progress('working on it');
        await sleep(1500);
        return 'slow done';
      default:
        return `steps: ${ctx.text}`;
    }
  },
};

interface Op {
  error?: string;
  kinds?: string[];
  state?: string;
  text?: string;
  prompt?: string;
}

interface Run {
  card: {
    url: string;
    preferred_transport: string;
    protocol_version: string;
    additional_interfaces: Array<{ url: string; transport: string }>;
    skills: string[];
  };
  transport: string;
  send: Op;
  stream: Op;
  get: Op;
  ask: Op;
  answer: Op;
  wait: Op;
  cancel: Op;
  slow: Op;
  resubscribe: Op;
}

function runPython(baseUrl: string, binding: string): Promise<Run> {
  const env = { ...process.env, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost' };
  return new Promise((resolve, reject) => {
    execFile(PYTHON!, [SCRIPT, baseUrl, binding], { env, timeout: 120_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`python failed: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout) as Run);
    });
  });
}

let mesh: TestMesh;

beforeAll(async () => {
  if (!PYTHON) return;
  mesh = await startTestMesh({ config: { a2a: { defaultAgent: 'steps' } } });
  await mesh.startWorker('steps-1', ['steps'], steps);
  await mesh.startWorker('echo-1', ['echo'], echoHandler);
}, 60_000);

afterAll(async () => {
  await mesh?.close();
});

describe.skipIf(!PYTHON)(
  'an A2A 0.3 client (a2a-sdk 0.3.x) against the coordinator',
  { timeout: 120_000 },
  () => {
    it.each([
      ['JSONRPC', 'JsonRpcTransport', '/a2a'],
      ['HTTP+JSON', 'RestTransport', '/a2a/rest'],
    ])(
      'discovers, sends, streams, gets, answers, cancels and resubscribes over %s',
      async (binding, transport) => {
        const run = await runPython(mesh.url, binding);
        // Discovery: the 0.3 fields of the union card at /.well-known/agent-card.json.
        expect(run.card).toMatchObject({
          url: `${mesh.url}/a2a`,
          preferred_transport: 'JSONRPC',
          protocol_version: '0.3.0',
        });
        expect(run.card.additional_interfaces).toEqual(
          expect.arrayContaining([{ url: `${mesh.url}/a2a/rest`, transport: 'HTTP+JSON' }]),
        );
        expect(run.card.skills).toEqual(expect.arrayContaining(['steps', 'echo']));
        expect(run.transport).toBe(transport);
        for (const [name, op] of Object.entries(run))
          if (typeof op === 'object' && op !== null && 'error' in op)
            expect.fail(`${name}: ${String(op.error)}`);
        // Send (blocking), stream, get: a plain message goes to the default agent.
        expect(run.send).toMatchObject({ state: 'completed', text: 'steps: hello from 0.3' });
        expect(run.stream.kinds![0]).toBe('task');
        expect(run.stream).toMatchObject({ state: 'completed', text: 'steps: stream from 0.3' });
        expect(run.get).toMatchObject({ state: 'completed', text: 'steps: hello from 0.3' });
        // An input request, answered over a stream that begins with the task.
        expect(run.ask).toMatchObject({ state: 'input-required', prompt: 'what colour?' });
        expect(run.answer.kinds![0]).toBe('task');
        expect(run.answer).toMatchObject({ state: 'completed', text: 'colour blue' });
        // Cancel, and resubscribe to a running task until it completes.
        expect(run.cancel).toMatchObject({ state: 'canceled' });
        expect(run.slow.state).not.toBe('completed');
        expect(run.resubscribe.kinds![0]).toBe('task');
        expect(run.resubscribe).toMatchObject({ state: 'completed', text: 'slow done' });
      },
    );
  },
);
