// Interop: the official Python `openai` client (a real peer, not our own TypeScript SDK) against the
// coordinator's OpenAI-compatible API, non-streaming, streaming and a 404.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

const SCRIPT = fileURLToPath(new URL('../fixtures/python_openai_client.py', import.meta.url));

interface PythonReport {
  openai_version: string;
  non_stream: string;
  non_stream_object: string;
  stream: string;
  stream_chunks: number;
  finish_reasons: string[];
  not_found: string | null;
  not_found_status: number | null;
}

function runPython(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  // A proxy configured in the environment must not capture requests to 127.0.0.1.
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NO_PROXY: '127.0.0.1,localhost',
    no_proxy: '127.0.0.1,localhost',
  };
  return new Promise((resolve) => {
    // The project's venv (scripts/provision.sh), else whatever python3 is on PATH.
    execFile(
      process.env.AMF_TEST_PYTHON ?? 'python3',
      args,
      { env, timeout: 30_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe('Python openai client against the mesh', () => {
  let mesh: TestMesh;
  let report: PythonReport;

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('echo-py', ['echo'], echoHandler);
    const run = await runPython([SCRIPT, `${mesh.url}/v1`]);
    if (run.code !== 0)
      throw new Error(`python client failed (exit ${run.code}):\n${run.stderr}\n${run.stdout}`);
    report = JSON.parse(run.stdout) as PythonReport;
  });
  afterAll(() => mesh?.close());

  it('runs the installed openai package (major version 1 or later)', () => {
    expect(Number(report.openai_version.split('.')[0])).toBeGreaterThanOrEqual(1);
  });

  it('gets a non-streaming completion from the echo worker', () => {
    expect(report.non_stream_object).toBe('chat.completion');
    expect(report.non_stream).toBe('hello from python');
  });

  it('gets a streamed completion in several chunks with one finish_reason', () => {
    expect(report.stream).toBe('streamed from python client');
    expect(report.stream_chunks).toBeGreaterThan(1);
    expect(report.finish_reasons).toEqual(['stop']);
  });

  it('raises openai.NotFoundError for a model no agent serves', () => {
    expect(report.not_found).toBe('NotFoundError');
    expect(report.not_found_status).toBe(404);
  });

  it('the requests really crossed the fabric to the worker', () => {
    const texts = mesh.events
      .filter((e) => e.subject === 'amf.result.final')
      .map((e) => (e.event.data.payload as { result?: { text?: string } }).result?.text);
    expect(texts).toEqual(expect.arrayContaining(['hello from python', 'streamed from python client']));
  });
});
