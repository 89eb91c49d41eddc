/**
 * Running the built CLI (bin/amf.js → dist/) on hosts of the simulated LAN (scripts/lib/lanSim.mjs),
 * as a user would on several machines: start a long-running command, run one to its end, fetch from
 * a host. Shared by the tests in test/lan.
 */
import type { ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LanHost } from '../../scripts/lib/lanSim.mjs';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const AMF_BIN = join(ROOT, 'bin/amf.js');

export interface Started {
  child: ChildProcess;
  output: () => string;
}

/** Starts `amf ...args` on `host`; resolves once `ready` appears in its stdout. */
export function startAmf(host: LanHost, args: string[], ready: RegExp, home: string): Promise<Started> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('AMF_')) env[k] = v;
  env.HOME = home;
  const child = host.spawn(process.execPath, [AMF_BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`not ready after 30 s: amf ${args.join(' ')}\n${out}`)),
      30_000,
    );
    child.stdout!.on('data', () => {
      if (ready.test(out)) {
        clearTimeout(timer);
        resolve({ child, output: () => out });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`amf ${args[0]} exited with ${code} before it was ready:\n${out}`));
    });
  });
}

/** Runs `amf ...args` on `host` to its end. */
export function runAmf(
  host: LanHost,
  args: string[],
  home: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('AMF_')) env[k] = v;
  env.HOME = home;
  const child = host.spawn(process.execPath, [AMF_BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) =>
    child.once('exit', (code) => resolve({ code: code ?? -1, stdout, stderr })),
  );
}

/** fetch from `host` (a node process in its namespace): status and body text. */
export async function fetchFrom(
  host: LanHost,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: string }> {
  const script = `fetch(${JSON.stringify(url)}, ${JSON.stringify(init)}).then(async r => { process.stdout.write(JSON.stringify({ status: r.status, body: await r.text() })) }, e => { process.stdout.write(JSON.stringify({ status: -1, body: String(e.cause?.code ?? e) })) })`;
  const child = host.spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise((resolve) => child.once('exit', resolve));
  return JSON.parse(out) as { status: number; body: string };
}

/** A chat completion body for model amf/echo. */
export function chat(text: string): string {
  return JSON.stringify({ model: 'amf/echo', messages: [{ role: 'user', content: text }] });
}

/** The coordinator of a LAN test: `amf up --host` on `host` (ports 8765 and 4222), and its operator key. */
export async function startLanCoordinator(
  host: LanHost,
  dataDir: string,
  home: string,
): Promise<{ child: ChildProcess; url: string; operatorKey: string }> {
  const up = await startAmf(
    host,
    [
      'up',
      '--host',
      host.address,
      '--port',
      '8765',
      '--nats-port',
      '4222',
      '--data-dir',
      dataDir,
      '--mdns-interface',
      host.address,
    ],
    /AMF coordinator/,
    home,
  );
  const operatorKey = (await readFile(join(dataDir, 'operator.key'), 'utf8')).trim();
  return { child: up.child, url: `http://${host.address}:8765`, operatorKey };
}

/** `amf invite` on the coordinator's host; resolves with the token (the last line). */
export async function inviteOn(
  host: LanHost,
  dataDir: string,
  coordinatorUrl: string,
  home: string,
  tags?: string,
): Promise<string> {
  const run = await runAmf(
    host,
    ['invite', ...(tags ? ['--tags', tags] : []), '--data-dir', dataDir, '--coordinator', coordinatorUrl],
    home,
  );
  if (run.code !== 0) throw new Error(`amf invite failed: ${run.stderr}`);
  return run.stdout.trim().split('\n').at(-1)!;
}

/** `amf worker` arguments for an echo worker on `host` joining with `invite` (no mDNS unless asked). */
export function invitedWorkerArgs(opts: {
  name: string;
  tags: string;
  host?: LanHost;
  dataDir: string;
  invite: string;
  mdns?: boolean;
  port?: string;
}): string[] {
  return [
    'worker',
    '--name',
    opts.name,
    '--tags',
    opts.tags,
    '--handler',
    'echo',
    ...(opts.host ? ['--host', opts.host.address] : []),
    '--port',
    opts.port ?? '0',
    '--data-dir',
    opts.dataDir,
    ...(opts.mdns && opts.host ? ['--mdns-interface', opts.host.address] : ['--no-mdns']),
    '--invite',
    opts.invite,
  ];
}
