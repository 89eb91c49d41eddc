/**
 * The data disk fills up under a running mesh, then space returns. `amf up --demo` runs on a tmpfs
 * of its own (a mount namespace of the test's own); a filler file takes every free byte. While the
 * disk is full, new requests are refused at once with 507 naming the store (not "no claim within
 * TTL" after 30 s) and `/health` says the store is full; once the filler is gone the mesh answers
 * again by itself, restarting a nats-server whose JetStream stopped answering (nats-server 2.9 does
 * after a full disk) without anyone's help.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const AMF = join(ROOT, 'bin/amf.js');

/** Polls `check` until it gives a value or `ms` pass. */
async function waitFor<T>(check: () => Promise<T | undefined>, ms: number, what: string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function chat(url: string, text: string): Promise<{ status: number; body: string }> {
  const res = await fetch(new URL('/v1/chat/completions', url), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: text }] }),
    signal: AbortSignal.timeout(40_000),
  });
  return { status: res.status, body: await res.text() };
}

describe('a data disk that fills up and empties again', () => {
  let child: ChildProcess | undefined;
  let ctl = '';

  afterAll(async () => {
    if (child?.pid && child.exitCode === null && child.signalCode === null) {
      // SIGTERM first: `amf up` then stops the nats-server it started in a process group of its own,
      // which a SIGKILL of this group would leave running.
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      process.kill(-child.pid, 'SIGTERM');
      const stopped = await Promise.race([exited.then(() => true), sleep(8_000).then(() => false)]);
      if (!stopped) process.kill(-child.pid, 'SIGKILL');
    }
    if (ctl) await rm(ctl, { recursive: true, force: true });
  });

  it('refuses new requests with 507 while full, and recovers by itself', async () => {
    if (!existsSync(join(ROOT, 'dist/cli/main.js'))) throw new Error('dist/ is missing: run npm run build');
    // The tmpfs is seen only inside the namespace: the test steers the filler through files here.
    ctl = await mkdtemp(join(tmpdir(), 'amf-full-disk-'));
    const script = [
      'dir=$(mktemp -d)',
      'mount -t tmpfs -o size=96m tmpfs "$dir" || exit 3',
      `"${process.execPath}" "${AMF}" up --demo --data-dir "$dir/data" --port 0 --nats-port 0 --no-mdns &`,
      'amf=$!',
      `while [ ! -e "${ctl}/fill" ]; do sleep 0.1; done`,
      'dd if=/dev/zero of="$dir/filler" bs=1M 2>/dev/null; sync',
      `touch "${ctl}/filled"`,
      `while [ ! -e "${ctl}/free" ]; do sleep 0.1; done`,
      'rm -f "$dir/filler"',
      `touch "${ctl}/freed"`,
      'wait $amf',
    ].join('\n');
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AMF_')));
    child = spawn('unshare', ['-m', 'bash', '-c', script], {
      env: { ...env, AMF_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const url = await waitFor(
      async () => /AMF coordinator[^\n]*?(http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1],
      60_000,
      'amf up to start',
    );
    const first = await waitFor(
      async () => {
        const r = await chat(url, 'before');
        return r.status === 200 ? r : undefined;
      },
      30_000,
      'a first answer',
    );
    expect(first.body).toContain('before');

    await writeFile(join(ctl, 'fill'), '');
    await waitFor(async () => (existsSync(join(ctl, 'filled')) ? true : undefined), 30_000, 'the disk full');
    // Named by /health within a second or two (the coordinator watches the disk).
    const health = await waitFor(
      async () => {
        const res = await fetch(new URL('/health', url), { signal: AbortSignal.timeout(5_000) });
        const body = (await res.json()) as { nats: { jetstream?: string; problem?: string } };
        return body.nats.jetstream === 'full' ? { status: res.status, nats: body.nats } : undefined;
      },
      10_000,
      '/health naming the full store',
    );
    expect(health.status).toBe(503);
    expect(health.nats.problem).toMatch(/disk|store/);
    const refused = await waitFor(
      async () => {
        const r = await chat(url, 'while full');
        return r.status === 507 ? r : undefined;
      },
      10_000,
      'a 507 while the disk is full',
    );
    expect(refused.body).toMatch(/store|disk/);
    expect(refused.body).toContain('insufficient_storage');

    await writeFile(join(ctl, 'free'), '');
    await waitFor(async () => (existsSync(join(ctl, 'freed')) ? true : undefined), 30_000, 'the disk freed');
    const after = await waitFor(
      async () => {
        const r = await chat(url, 'after');
        return r.status === 200 ? r : undefined;
      },
      120_000,
      `an answer once space is back (output so far:\n${output.slice(-2000)})`,
    );
    expect(after.body).toContain('after');
  }, 300_000);
});
