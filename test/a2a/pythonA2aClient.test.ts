// Interop: the official Python A2A client (pip a2a-sdk 1.3.0) against our coordinator's /a2a (tasks
// dispatched into the mesh) and a worker's /a2a, over JSON-RPC and HTTP+JSON, in protocol 1.0 and
// 0.3 (the Python SDK's own compatibility transports), blocking and streaming.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const SCRIPT = fileURLToPath(new URL('./python_a2a_client.py', import.meta.url));

interface Case {
  binding: 'JSONRPC' | 'HTTP+JSON';
  version: '1.0' | '0.3';
  stream: boolean;
  text: string;
  tag?: string;
}

interface CaseResult {
  ok: boolean;
  error?: string;
  transport: string;
  kinds?: string[];
  state?: string;
  text?: string;
  task_id?: string | null;
}

const TRANSPORTS: Record<string, string> = {
  'JSONRPC 1.0': 'JsonRpcTransport',
  'HTTP+JSON 1.0': 'RestTransport',
  'JSONRPC 0.3': 'CompatJsonRpcTransport',
  'HTTP+JSON 0.3': 'CompatRestTransport',
};

function cases(tag?: string): Case[] {
  const out: Case[] = [];
  for (const binding of ['JSONRPC', 'HTTP+JSON'] as const)
    for (const version of ['1.0', '0.3'] as const)
      for (const stream of [false, true])
        out.push({
          binding,
          version,
          stream,
          text: `python ${binding} ${version} ${stream ? 'streaming' : 'blocking'}`,
          ...(tag ? { tag } : {}),
        });
  return out;
}

/** Runs every case in one Python process (importing the SDK is the slow part). */
function runPython(baseUrl: string, list: Case[]): Promise<CaseResult[]> {
  // A proxy configured in the environment must not capture requests to 127.0.0.1.
  const env = { ...process.env, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost' };
  return new Promise((resolve, reject) => {
    execFile(
      // The project's venv (scripts/test.sh), else whatever python3 is on PATH.
      process.env.AMF_TEST_PYTHON ?? 'python3',
      [SCRIPT, baseUrl, JSON.stringify(list)],
      { env, timeout: 120_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`python failed: ${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout) as CaseResult[]);
      },
    );
  });
}

function expectAllAnswered(list: Case[], results: CaseResult[]): void {
  expect(results).toHaveLength(list.length);
  list.forEach((c, i) => {
    const r = results[i]!;
    const label = `${c.binding} ${c.version} ${c.stream ? 'stream' : 'blocking'}`;
    expect(r.error, label).toBeUndefined();
    expect(r.transport, label).toBe(TRANSPORTS[`${c.binding} ${c.version}`]);
    expect(r.state, label).toBe('TASK_STATE_COMPLETED');
    expect(r.text, label).toBe(c.text);
    if (c.stream) expect(r.kinds!.length, label).toBeGreaterThan(1);
  });
}

describe('Python a2a-sdk client against AMF agents', { timeout: 180_000 }, () => {
  let mesh: TestMesh;
  let echo: RunningWorker;

  beforeAll(async () => {
    mesh = await startTestMesh();
    echo = await mesh.startWorker('py-a2a-echo', ['echo'], echoHandler);
  });
  afterAll(async () => {
    await mesh?.close();
  });

  it('the coordinator dispatches into the mesh for every binding, version and mode', async () => {
    const list = cases('echo');
    expectAllAnswered(list, await runPython(mesh.url, list));
  });

  it('a worker answers with its own handler for every binding, version and mode', async () => {
    const list = cases();
    expectAllAnswered(list, await runPython(echo.url, list));
  });
});
