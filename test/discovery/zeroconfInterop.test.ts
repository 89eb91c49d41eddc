// Interop with an independent DNS-SD implementation: Debian's python3-zeroconf (run with the system
// python, /usr/bin/python3) browses our advertiser and registers a service for our browser. Runs only
// inside a private network namespace (mdnsTestKit.onlyLoopback).
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { RawAdvertisement } from '../../src/discovery/advertisement.js';
import { startMdnsAdvertiser } from '../../src/discovery/mdns/advertiser.js';
import { startMdnsBrowser } from '../../src/discovery/mdns/browser.js';
import { encodeTxt } from '../../src/discovery/txtRecord.js';
import { onlyLoopback, uniqueName, waitFor } from './mdnsTestKit.js';

const PYTHON = '/usr/bin/python3';
const BROWSE = fileURLToPath(new URL('../fixtures/zeroconf_browse.py', import.meta.url));
const REGISTER = fileURLToPath(new URL('../fixtures/zeroconf_register.py', import.meta.url));

interface BrowseLine {
  event: 'add' | 'update' | 'remove';
  instance: string;
  port?: number;
  server?: string;
  addresses?: string[];
  properties?: Record<string, string | null>;
  txt_hex?: string;
}

/** A python fixture whose stdout lines are collected as they arrive. */
class PythonPeer {
  readonly lines: string[] = [];
  private stderr = '';
  readonly exited: Promise<number | null>;
  private readonly child: ChildProcessWithoutNullStreams;

  constructor(script: string, args: string[]) {
    this.child = spawn(PYTHON, [script, ...args], { stdio: 'pipe' });
    let partial = '';
    this.child.stdout.on('data', (chunk: Buffer) => {
      const parts = (partial + chunk.toString('utf8')).split('\n');
      partial = parts.pop() ?? '';
      this.lines.push(...parts.filter((line) => line.length > 0));
    });
    this.child.stderr.on('data', (chunk: Buffer) => (this.stderr += chunk.toString('utf8')));
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
  }

  json(): BrowseLine[] {
    return this.lines.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as BrowseLine);
  }

  /** Closes stdin, which tells zeroconf_register.py to unregister and exit. */
  endInput(): void {
    this.child.stdin.end();
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    await this.exited;
  }

  describe(): string {
    return `stdout:\n${this.lines.join('\n')}\nstderr:\n${this.stderr}`;
  }
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

function python(script: string, args: string[]): PythonPeer {
  const peer = new PythonPeer(script, args);
  cleanups.push(() => peer.stop());
  return peer;
}

describe.skipIf(!onlyLoopback())('interop with python3-zeroconf (private namespace)', () => {
  it('python-zeroconf resolves our advertisement with the exact TXT, sees the update and the goodbye', async () => {
    const name = uniqueName('to-python');
    const txt = {
      id: `did:example:${name}`,
      ep: 'http://127.0.0.1:8771',
      proto: 'A2A/1.0,MCP/2025-11-25',
      td: 'lokål',
    };
    const advertiser = await startMdnsAdvertiser({
      instanceName: name,
      port: 8771,
      host: 'interop-host',
      txt,
    });
    cleanups.push(() => advertiser.close());
    const browser = python(BROWSE, ['--seconds', '20']);
    const line = (event: string) => () =>
      browser.json().find((l) => l.instance === name && l.event === event) ?? undefined;

    const added = await waitFor(line('add'), () => `python add line\n${browser.describe()}`, 15_000);
    expect(added.port).toBe(8771);
    expect(added.server).toBe('interop-host.local.');
    expect(added.addresses).toContain('127.0.0.1');
    expect(added.properties).toEqual(txt);
    expect(added.txt_hex).toBe(
      Buffer.concat(encodeTxt(txt).flatMap((b) => [Buffer.from([b.length]), b])).toString('hex'),
    );

    advertiser.update({ ...txt, status: 'draining' });
    const updated = await waitFor(line('update'), () => `python update line\n${browser.describe()}`, 15_000);
    expect(updated.properties).toEqual({ ...txt, status: 'draining' });

    await advertiser.close();
    await waitFor(line('remove'), () => `python remove line\n${browser.describe()}`, 15_000);
  });

  it('our browser sees a python-registered service with its TXT, then its goodbye', async () => {
    const name = uniqueName('from-python');
    const ads: RawAdvertisement[] = [];
    const goodbyes: string[] = [];
    const browser = await startMdnsBrowser({
      onAdvertisement: (ad) => ads.push(ad),
      onGoodbye: (instance) => goodbyes.push(instance),
    });
    cleanups.push(() => browser.close());
    const properties = { id: `spiffe://local/py/${name}`, ep: 'http://127.0.0.1:8772', tags: 'py,zeroconf' };
    const registrar = python(REGISTER, [name, '8772', JSON.stringify(properties)]);
    await waitFor(
      () => (registrar.lines.includes('registered') ? true : undefined),
      () => `registration\n${registrar.describe()}`,
      15_000,
    );

    const ad = await waitFor(() => ads.find((a) => a.instance === name), 'the python advertisement', 15_000);
    expect(ad).toMatchObject({ door: 'mdns', source: '127.0.0.1', txt: properties, invalid_utf8: false });
    expect(ad.txt_bytes).toBe(encodeTxt(properties).reduce((n, b) => n + 1 + b.length, 0));

    registrar.endInput();
    expect(await registrar.exited).toBe(0);
    await waitFor(() => (goodbyes.includes(name) ? true : undefined), 'the python goodbye', 10_000);
  });

  it('probing defers to a name python-zeroconf already holds: ours becomes "name (2)"', async () => {
    const name = uniqueName('python-owns');
    const registrar = python(REGISTER, [name, '8773', '{"id":"python"}']);
    await waitFor(
      () => (registrar.lines.includes('registered') ? true : undefined),
      () => `registration\n${registrar.describe()}`,
      15_000,
    );
    const advertiser = await startMdnsAdvertiser({ instanceName: name, port: 8774, txt: { id: 'ours' } });
    cleanups.push(() => advertiser.close());
    expect(advertiser.instanceName).toBe(`${name} (2)`);
  });

  it('our advertiser defends its name: python-zeroconf refuses to register it', async () => {
    const name = uniqueName('amf-owns');
    const advertiser = await startMdnsAdvertiser({ instanceName: name, port: 8775, txt: { id: 'ours' } });
    cleanups.push(() => advertiser.close());
    const registrar = python(REGISTER, [name, '8776', '{"id":"python"}']);
    expect(await registrar.exited).not.toBe(0);
    expect(registrar.describe()).toMatch(/NonUniqueNameException/);
    // python-zeroconf probes three times and starts an interpreter: slow on a loaded 2-core box.
  }, 90_000);
});
