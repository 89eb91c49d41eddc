/**
 * What a handler's failure tells whom (worker/invokeHandler.ts): the author sees every failure in the
 * worker's log with the task id and the stack; a client sees a HandlerError's message, but for any
 * other throw only `handler_error` and the task id (a thrown message may hold a secret); the full
 * message reaches the operator's views as the final's `error.detail`. A wrong return value names
 * what was expected; an empty answer is a warning; a handler file that does not parse is named with
 * its line and column.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HandlerError, type WorkerHandler } from '../../src/worker/handlerApi.js';
import { loadHandler } from '../../src/cli/handlerLoader.js';
import type { LogLevel } from '../../src/log.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

interface LogLine {
  level: LogLevel;
  message: string;
  fields: Record<string, unknown> | undefined;
}

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SECRET = 'database password rejected for user "svc"';

const handler: WorkerHandler = {
  name: 'faulty',
  description: 'fails in the way the text asks',
  handle: (ctx): unknown => {
    if (ctx.text === 'throw') throw new Error(SECRET);
    if (ctx.text === 'public')
      throw new HandlerError('quota_exceeded', 'you have used your 10 requests today');
    if (ctx.text === 'number') return 42;
    if (ctx.text === 'empty') return undefined;
    return { text: 'fine' };
  },
} as WorkerHandler;

function payloadOf(data: unknown): { task_id?: string; error?: { detail?: string } } {
  return (data as { payload: { task_id?: string; error?: { detail?: string } } }).payload;
}

async function ask(
  mesh: TestMesh,
  text: string,
): Promise<{ status: number; body: { error?: { message?: string } } }> {
  const res = await fetch(`${mesh.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'amf/faulty', messages: [{ role: 'user', content: text }] }),
  });
  return { status: res.status, body: (await res.json()) as { error?: { message?: string } } };
}

describe('handler failures, as the author, the client and the operator see them', () => {
  let mesh: TestMesh;
  const logged: LogLine[] = [];

  beforeAll(async () => {
    mesh = await startTestMesh();
    await mesh.startWorker('faulty', ['faulty'], handler, {
      log: (level, message, fields) => logged.push({ level, message, fields }),
    });
  });
  afterAll(async () => {
    await mesh?.close();
  });

  it('a thrown error: the client gets handler_error and the task id, never the message', async () => {
    const { status, body } = await ask(mesh, 'throw');
    expect(status).toBeGreaterThanOrEqual(400);
    const message = body.error?.message ?? '';
    expect(message).toContain('handler_error');
    expect(message).not.toContain('password');
    const taskId = /task ([0-9a-f-]{36})/.exec(message)?.[1];
    expect(taskId, message).toBeDefined();
    // The author's terminal: the message, the task id and the stack.
    const line = logged.find((l) => l.level === 'error' && l.message.includes(taskId!));
    expect(line?.message).toContain(SECRET);
    expect(String(line?.fields?.stack)).toContain('handlerErrors.test.ts');
    // The operator's view: the final event keeps the full message as its detail.
    const final = await mesh.waitForEvent(
      (e) => e.subject === 'amf.result.final' && payloadOf(e.event.data).task_id === taskId,
      10_000,
      'the final',
    );
    expect(payloadOf(final.event.data).error?.detail).toBe(SECRET);
  });

  it('a HandlerError is the author making a message public: the client gets it', async () => {
    const { body } = await ask(mesh, 'public');
    expect(body.error?.message).toContain('you have used your 10 requests today');
  });

  it('a wrong return value names what was expected, for the client and in the log', async () => {
    const { body } = await ask(mesh, 'number');
    expect(body.error?.message).toContain('the handler returned a number');
    expect(body.error?.message).toContain('return a string');
    expect(logged.some((l) => l.message.includes('invalid_result'))).toBe(true);
  });

  it('an empty answer completes, with a warning in the log', async () => {
    const { status } = await ask(mesh, 'empty');
    expect(status).toBe(200);
    expect(logged.some((l) => l.level === 'warn' && l.message.includes('with nothing'))).toBe(true);
  });
});

describe('loading a handler', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'amf-handler-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('a syntax error names the file, line and column, with the line', async () => {
    // Through the built loader in a plain Node process: vitest's own module loader reports parse
    // errors its own way, and users load handlers with Node.
    const file = join(dir, 'broken.mjs');
    await writeFile(file, 'export default async (ctx) => {\n  const x = 1;\n  return x +;\n};\n');
    const loader = pathToFileURL(join(ROOT, 'dist/cli/handlerLoader.js')).href;
    const script = `import(${JSON.stringify(loader)}).then((m) => m.loadHandler(${JSON.stringify(file)})).catch((e) => process.stdout.write(e.message))`;
    const message = await new Promise<string>((resolve) =>
      execFile(process.execPath, ['-e', script], (_err, stdout) => resolve(stdout)),
    );
    expect(message).toContain(`${file}:3:13: SyntaxError`);
    expect(message).toContain('return x +;');
  });

  it('a module that cannot be found names the path it tried', async () => {
    const err = await loadHandler('./does-not-exist.mjs').catch((e: unknown) => e as Error);
    expect((err as Error).message).toContain('cannot load handler ./does-not-exist.mjs');
  });

  it('the built-in names load without a path', async () => {
    expect((await loadHandler('calc')).name).toBe('calc');
    expect((await loadHandler('echo')).name).toBe('echo');
  });
});
