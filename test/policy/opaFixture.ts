/**
 * The real `opa` binary for policy tests: `opa eval` on stdin input, and an `opa run --server`
 * per test file on a free 127.0.0.1 port.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { findOpaBinary } from '../../src/policy/opaBuild.js';
import { freePort } from '../../scripts/lib/freePort.mjs';

/** The repository's policies/ directory. */
export const POLICIES_DIR = fileURLToPath(new URL('../../policies/', import.meta.url));

/** The opa binary, or null when it is truly absent (then opa-based tests are skipped). */
export const OPA_BINARY = await findOpaBinary();

/** Evaluates `data.<query>` with `opa eval -d <dir> -I` (input on stdin); undefined → throws. */
export function opaEval(query: string, input: unknown, dir = POLICIES_DIR): Promise<unknown> {
  if (!OPA_BINARY) throw new Error('opa binary not found');
  const opa = OPA_BINARY;
  return new Promise((resolve, reject) => {
    const child = execFile(
      opa,
      ['eval', '-d', dir, '-I', '--format', 'json', query],
      { timeout: 20_000, maxBuffer: 4 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`opa eval failed: ${stderr || err.message}`));
        const out = JSON.parse(stdout) as { result?: Array<{ expressions: Array<{ value: unknown }> }> };
        const value = out.result?.[0]?.expressions[0]?.value;
        if (value === undefined) return reject(new Error(`opa eval: ${query} is undefined`));
        resolve(value);
      },
    );
    child.stdin?.end(JSON.stringify(input));
  });
}

/** A free TCP port on 127.0.0.1 (bound then released). */
/** A running `opa run --server`. */
export interface OpaServer {
  url: string;
  close(): Promise<void>;
}

/** Starts `opa run --server` on a free port with `paths` loaded; resolves once /health answers. */
export async function startOpaServer(paths: string[] = [POLICIES_DIR]): Promise<OpaServer> {
  if (!OPA_BINARY) throw new Error('opa binary not found');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    OPA_BINARY,
    [
      'run',
      '--server',
      '--disable-telemetry',
      '--log-level',
      'error',
      '--addr',
      `127.0.0.1:${port}`,
      ...paths,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`opa run exited with ${child.exitCode}: ${stderr}`);
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1_000) });
      if (res.ok) return { url, close };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  await close();
  throw new Error(`opa run --server did not become healthy on ${url}: ${stderr}`);
}
