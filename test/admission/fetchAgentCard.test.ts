import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchAgentCard } from '../../src/admission/fetchAgentCard.js';

describe('agent card fetch is guarded against SSRF', () => {
  let server: Server;
  let port = 0;
  const hits: string[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      hits.push(req.url ?? '');
      switch (req.url) {
        case '/card':
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ name: 'ok' }));
          return;
        case '/same-host-redirect':
          res.writeHead(302, { location: '/card' }).end();
          return;
        case '/other-host-redirect':
          res.writeHead(302, { location: `http://localhost:${port}/card` }).end();
          return;
        case '/metadata-redirect':
          res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
          return;
        case '/huge':
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ pad: 'x'.repeat(200_000) }));
          return;
        case '/slow':
          setTimeout(() => res.writeHead(200).end('{}'), 2000).unref();
          return;
        case '/not-json':
          res.writeHead(200).end('<html>');
          return;
        default:
          res.writeHead(404).end();
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  const ep = () => `http://127.0.0.1:${port}`;

  it('fetches a card on the advertised host, following same-host redirects', async () => {
    expect(await fetchAgentCard(`${ep()}/card`, ep())).toEqual({ name: 'ok' });
    expect(await fetchAgentCard(`${ep()}/same-host-redirect`, ep())).toEqual({ name: 'ok' });
  });

  it('refuses another host, redirects to another host and metadata addresses', async () => {
    await expect(fetchAgentCard(`http://localhost:${port}/card`, ep())).rejects.toMatchObject({
      code: 'card_host_mismatch',
    });
    await expect(fetchAgentCard(`${ep()}/other-host-redirect`, ep())).rejects.toMatchObject({
      code: 'card_redirect_refused',
    });
    await expect(fetchAgentCard(`${ep()}/metadata-redirect`, ep())).rejects.toMatchObject({
      code: 'card_url_invalid',
    });
    await expect(
      fetchAgentCard('http://169.254.169.254/card', 'http://169.254.169.254'),
    ).rejects.toMatchObject({ code: 'card_url_invalid' });
    await expect(fetchAgentCard('file:///etc/passwd', ep())).rejects.toMatchObject({
      code: 'card_url_invalid',
    });
    expect(hits.filter((h) => h === '/card').length).toBeGreaterThan(0);
  });

  it('bounds size and time and wants JSON', async () => {
    await expect(fetchAgentCard(`${ep()}/huge`, ep(), { maxBytes: 65536 })).rejects.toMatchObject({
      code: 'card_too_large',
    });
    await expect(fetchAgentCard(`${ep()}/slow`, ep(), { timeoutMs: 200 })).rejects.toMatchObject({
      code: 'card_timeout',
    });
    await expect(fetchAgentCard(`${ep()}/not-json`, ep())).rejects.toMatchObject({ code: 'card_not_json' });
    await expect(fetchAgentCard(`${ep()}/missing`, ep())).rejects.toMatchObject({ code: 'card_http_error' });
  });
});
