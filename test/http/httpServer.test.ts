import { createServer, request } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { describe, expect, it } from 'vitest';
import { closeServer, listen } from '../../src/http/httpServer.js';

/** One GET over a keep-alive agent-less connection that the client leaves open. */
function getKeepAlive(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { connection: 'keep-alive' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve(text));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('httpServer', () => {
  it('listen returns the bound http URL for IPv4 and port 0', async () => {
    const server = createServer((_req, res) => res.end('hi'));
    const url = await listen(server, '127.0.0.1', 0);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(new URL(url).port).not.toBe('0');
    expect(await getKeepAlive(url)).toBe('hi');
    await closeServer(server);
    expect(server.listening).toBe(false);
  });

  it('listen brackets IPv6 addresses', async () => {
    const server = createServer((_req, res) => res.end('six'));
    const url = await listen(server, '::1', 0);
    expect(url).toMatch(/^http:\/\/\[::1\]:\d+$/);
    expect(await getKeepAlive(url)).toBe('six');
    await closeServer(server);
  });

  it('listen says https for an https server', async () => {
    // No certificate is needed to bind; the scheme comes from the server class.
    const server = createHttpsServer({});
    const url = await listen(server, '127.0.0.1', 0);
    expect(url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    await closeServer(server);
  });

  it('listen rejects when the port is taken, and the server can be reused', async () => {
    const first = createServer();
    const url = await listen(first, '127.0.0.1', 0);
    const second = createServer();
    await expect(listen(second, '127.0.0.1', Number(new URL(url).port))).rejects.toMatchObject({
      code: 'EADDRINUSE',
    });
    // The failed attempt left no stale error listener behind.
    expect(second.listenerCount('error')).toBe(0);
    await closeServer(first);
  });

  it('closeServer does not wait for idle keep-alive connections', async () => {
    const server = createServer((_req, res) => res.end('ok'));
    server.keepAliveTimeout = 60_000;
    const url = await listen(server, '127.0.0.1', 0);
    await getKeepAlive(url);
    const started = Date.now();
    await closeServer(server);
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('closeServer cuts a hanging request after its grace period', async () => {
    const server = createServer(() => {
      /* never answers */
    });
    const url = await listen(server, '127.0.0.1', 0);
    const pending = getKeepAlive(url).catch((err: Error) => err);
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    await closeServer(server);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(1500);
    expect(elapsed).toBeLessThan(5000);
    expect(await pending).toBeInstanceOf(Error);
  });
});
