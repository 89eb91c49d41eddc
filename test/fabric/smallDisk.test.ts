/**
 * `amf up` on a small disk (a tmpfs of a few MiB in a mount namespace of the test's own): the store
 * is sized from the free space and the mesh starts (it needed about 3.2 GB before); on a disk too
 * small for even the least store, it says what to do and exits 1 instead of hanging.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const AMF = join(ROOT, 'bin/amf.js');

/** Runs `amf up` on a fresh tmpfs of `size`; stops it with SIGTERM once `ready` shows (or at the end). */
function upOnTmpfs(size: string, ready: RegExp): Promise<{ code: number | null; output: string }> {
  if (!existsSync(join(ROOT, 'dist/cli/main.js'))) throw new Error('dist/ is missing: run npm run build');
  const script = [
    'set -e',
    'dir=$(mktemp -d)',
    `mount -t tmpfs -o size=${size} tmpfs "$dir"`,
    `exec "${process.execPath}" "${AMF}" up --data-dir "$dir/data" --port 0 --nats-port 0 --no-mdns`,
  ].join('\n');
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AMF_')));
  const child = spawn('unshare', ['-m', 'bash', '-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const onData = (d: Buffer) => {
    output += d.toString();
    if (ready.test(output)) child.kill('SIGTERM');
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const deadline = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(deadline);
      resolve({ code, output });
    }),
  );
}

describe('the JetStream store on a small disk', () => {
  it('starts on 24 MiB, reserving less than the defaults and saying so', async () => {
    const run = await upOnTmpfs('24m', /AMF coordinator/);
    expect(run.output).toContain('AMF coordinator');
    expect(run.output).toMatch(/JetStream store: reserving \d+ MiB/);
    expect(run.output).toContain('nats.store_max_bytes');
  }, 90_000);

  it('on 4 MiB, exits 1 naming the data dir and what to do, instead of hanging', async () => {
    const run = await upOnTmpfs('4m', /AMF coordinator/);
    expect(run.code).toBe(1);
    expect(run.output).toContain('cannot hold the mesh');
    expect(run.output).toContain('nats.store_max_bytes');
  }, 90_000);
});
