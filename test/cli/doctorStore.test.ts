/**
 * `amf doctor`'s store check: the running mesh's JetStream store as its coordinator reports it
 * (`/health` answers 503 while degraded, and the body says why), else the data dir's free space.
 */
import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkStore } from '../../src/cli/doctorStore.js';
import { listen, closeServer } from '../../src/http/httpServer.js';

describe('amf doctor: the store', () => {
  let server: Server;
  let url = '';
  let answer: { status: number; body: unknown } = { status: 200, body: {} };
  let dir = '';

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'amf-doctor-store-'));
    server = createServer((_req, res) => {
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body));
    });
    url = await listen(server, '127.0.0.1', 0);
  });
  afterAll(async () => {
    await closeServer(server);
    await rm(dir, { recursive: true, force: true });
  });

  it('fails while the running mesh reports its store full, naming why', async () => {
    answer = {
      status: 503,
      body: {
        status: 'degraded',
        nats: { connected: true, responsive: true, jetstream: 'full', problem: 'the disk has 0 KiB free' },
      },
    };
    const check = await checkStore(dir, `${url}/health`);
    expect(check.level).toBe('fail');
    expect(check.detail).toContain('0 KiB free');
    expect(check.fix).toContain('free some space');
  });

  it('fails on a frozen server, passes on a store that takes writes', async () => {
    answer = { status: 503, body: { status: 'degraded', nats: { connected: true, responsive: false } } };
    expect((await checkStore(dir, `${url}/health`)).level).toBe('fail');
    answer = {
      status: 200,
      body: { status: 'ok', nats: { connected: true, responsive: true, jetstream: 'ok' } },
    };
    expect(await checkStore(dir, `${url}/health`)).toMatchObject({ level: 'ok' });
  });

  it('without a running mesh, reports the free space of the data dir', async () => {
    const check = await checkStore(join(dir, 'not-yet'), undefined);
    expect(check.name).toBe('store');
    expect(check.detail).toMatch(/free on the disk of/);
  });
});
