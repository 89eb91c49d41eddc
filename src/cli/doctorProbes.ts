/**
 * What doctor's checks look at, each bounded by a timeout: a program's version output, whether a
 * port is free, whether a TCP address answers, a JSON health endpoint; and small parsers.
 */
import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import { createServer, connect } from 'node:net';
import path from 'node:path';

const EXEC_TIMEOUT_MS = 2000;

/** A program's version output, or why it could not be had. */
export type VersionRun = { ok: true; output: string } | { ok: false; notFound: boolean; error: string };

/** Runs `binary args` (a version flag) with a timeout; never throws. */
export function runVersion(binary: string, args: string[]): Promise<VersionRun> {
  return new Promise((resolve) => {
    execFile(
      binary,
      args,
      { timeout: EXEC_TIMEOUT_MS, maxBuffer: 64 * 1024, windowsHide: true },
      (err, stdout, stderr) => {
        if (err) {
          const e = err as NodeJS.ErrnoException & { killed?: boolean };
          if (e.code === 'ENOENT') resolve({ ok: false, notFound: true, error: 'not found' });
          else if (e.killed)
            resolve({ ok: false, notFound: false, error: `timed out after ${EXEC_TIMEOUT_MS} ms` });
          else resolve({ ok: false, notFound: false, error: firstLine(String(stderr || e.message)) });
          return;
        }
        resolve({ ok: true, output: `${stdout}${stderr}`.trim() });
      },
    );
  });
}

/** `free`, `in-use`, or the error that prevented listening (e.g. the host is not a local address). */
export function portState(host: string, port: number): Promise<'free' | 'in-use' | string> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', (err: NodeJS.ErrnoException) => {
      resolve(err.code === 'EADDRINUSE' ? 'in-use' : (err.code ?? err.message));
    });
    server.listen({ host, port, exclusive: true }, () => {
      server.close(() => resolve('free'));
    });
  });
}

/** True when a TCP connection opens within the timeout, else the reason it did not. */
export function tcpReachable(host: string, port: number, timeoutMs: number): Promise<true | string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (result: true | string): void => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () => done(`no answer within ${timeoutMs} ms`));
    socket.once('connect', () => done(true));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
  });
}

/** A JSON body fetched, or why not. */
export type JsonGet = { ok: true; body: unknown } | { ok: false; error: string };

/** GETs a URL with a timeout; a non-JSON body is returned as text. */
export async function getJson(url: string, timeoutMs: number): Promise<JsonGet> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    if (!res.ok) return { ok: false, error: `HTTP ${res.status}` };
    try {
      return { ok: true, body: JSON.parse(text) as unknown };
    } catch {
      return { ok: true, body: text };
    }
  } catch (err) {
    const e = err as Error & {
      cause?: { code?: string; message?: string; errors?: Array<{ code?: string }> };
    };
    if (e.name === 'TimeoutError') return { ok: false, error: `no answer within ${timeoutMs} ms` };
    // fetch wraps the socket error ("fetch failed"); the useful part is the cause's code.
    const cause = e.cause;
    return { ok: false, error: cause?.code ?? cause?.errors?.[0]?.code ?? cause?.message ?? e.message };
  }
}

/** True for a /health body (it has a `status`). */
export function isHealth(
  body: unknown,
): body is { status: unknown; version?: unknown; amf_version?: unknown } {
  return typeof body === 'object' && body !== null && 'status' in body;
}

/** " (amf X)" or " (version X)" from a /health body, or nothing. */
export function versionOf(body: { version?: unknown; amf_version?: unknown }): string {
  // amf_version is the release; `version` is the wire profile (af-mcp-0.1) on current coordinators.
  if (typeof body.amf_version === 'string') return ` (amf ${body.amf_version})`;
  return typeof body.version === 'string' ? ` (version ${body.version})` : '';
}

/** Host and port of one NATS server URL (default ports by scheme), undefined if unparsable. */
export function natsHostPort(server: string): { host: string; port: number } | undefined {
  const withScheme = /^[a-z]+:\/\//i.test(server) ? server : `nats://${server}`;
  try {
    const u = new URL(withScheme);
    const host = u.hostname.replace(/^\[|\]$/g, '');
    if (!host) return undefined;
    const defaultPort = u.protocol === 'ws:' ? 80 : u.protocol === 'wss:' ? 443 : 4222;
    return { host, port: u.port ? Number(u.port) : defaultPort };
  } catch {
    return undefined;
  }
}

/** The directory itself or its nearest ancestor that exists. */
export async function nearestExisting(dir: string): Promise<string> {
  let current = dir;
  for (;;) {
    try {
      await stat(current);
      return current;
    } catch {
      const parent = path.dirname(current);
      if (parent === current) return current;
      current = parent;
    }
  }
}

/** The first line of a text, trimmed. */
export function firstLine(text: string): string {
  return text.split('\n')[0]?.trim() ?? '';
}
