import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkUrl, createGuardedFetch, guardedFetch, NetError } from '../../src/net/guardedFetch.js';
import { closeServer, listen } from '../../src/http/httpServer.js';

/** What a request saw, for the assertions about redirects and headers. */
interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
}

let server: Server;
let base = '';
let port = 0;
const seen: Seen[] = [];

function route(req: IncomingMessage, res: ServerResponse): void {
  seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
  const path = (req.url ?? '/').split('?')[0];
  switch (path) {
    case '/ok':
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      return;
    case '/echo-headers':
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(req.headers));
      return;
    case '/to-metadata':
      res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
      return;
    case '/to-mapped-metadata':
      res.writeHead(307, { location: 'http://[::ffff:169.254.169.254]/latest/' }).end();
      return;
    case '/to-gcp':
      res.writeHead(301, { location: 'http://metadata.google.internal/computeMetadata/v1/' }).end();
      return;
    case '/to-file':
      res.writeHead(302, { location: 'file:///etc/passwd' }).end();
      return;
    case '/to-ok':
      res.writeHead(302, { location: '/ok' }).end();
      return;
    case '/to-localhost':
      res.writeHead(302, { location: `http://localhost:${port}/ok` }).end();
      return;
    case '/to-other-host':
      res.writeHead(302, { location: `http://other.example:${port}/ok` }).end();
      return;
    case '/see-other':
      res.writeHead(303, { location: '/ok' }).end();
      return;
    case '/loop':
      res.writeHead(302, { location: '/loop' }).end();
      return;
    case '/no-location':
      res.writeHead(302).end();
      return;
    case '/big-declared':
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 100_000 });
      res.end('x'.repeat(100_000));
      return;
    case '/big-chunked': {
      // No content-length: the cap must cut the body while it streams.
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = 'y'.repeat(16 * 1024);
      for (let i = 0; i < 8; i++) res.write(chunk);
      res.end();
      return;
    }
    case '/sse-small-events': {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let i = 0; i < 50; i++) res.write(`data: ${'e'.repeat(500)}\n\n`);
      res.end();
      return;
    }
    case '/sse-big-event':
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`data: ${'E'.repeat(5000)}\n\n`);
      return;
    case '/slow':
      setTimeout(() => res.writeHead(200).end('{}'), 3000).unref();
      return;
    case '/slow-body':
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"a":');
      setTimeout(() => res.end('1}'), 3000).unref();
      return;
    case '/empty':
      res.writeHead(204).end();
      return;
    default:
      res.writeHead(404).end();
  }
}

beforeAll(async () => {
  server = createServer(route);
  base = await listen(server, '127.0.0.1', 0);
  port = Number(new URL(base).port);
});
afterAll(() => closeServer(server));

async function refusal(p: Promise<unknown>): Promise<NetError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(NetError);
  return err as NetError;
}

describe('checkUrl', () => {
  it('accepts http(s) URLs and refuses everything else with a reason', () => {
    expect(checkUrl('http://127.0.0.1:1/x', { what: 'u' }).href).toBe('http://127.0.0.1:1/x');
    const cases: Array<[string, string]> = [
      ['not a url', 'url_invalid'],
      ['file:///etc/passwd', 'url_invalid'],
      ['ftp://example.com/', 'url_invalid'],
      ['http://user:pw@example.com/', 'url_invalid'],
      ['http://169.254.169.254/', 'host_refused'],
      ['http://0xa9fea9fe/', 'host_refused'],
      ['http://[::ffff:169.254.169.254]/', 'host_refused'],
      ['http://[fe80::1]/', 'host_refused'],
      ['http://[fd00:ec2::254]/', 'host_refused'],
      ['http://metadata.google.internal./', 'host_refused'],
      ['http://100.100.100.200/', 'host_refused'],
    ];
    for (const [url, reason] of cases) {
      let err: unknown;
      try {
        checkUrl(url, { what: 'test URL' });
      } catch (e) {
        err = e;
      }
      expect(err, url).toBeInstanceOf(NetError);
      expect((err as NetError).reason, url).toBe(reason);
      expect((err as NetError).code, url).toBe('INVALID_REQUEST');
    }
  });

  it('a name that spells a metadata address is just a name (DNS is not consulted)', () => {
    expect(() => checkUrl('http://169.254.169.254.lookalike.invalid/', { what: 'u' })).not.toThrow();
  });

  it('the host rule treats loopback names as one unless told otherwise', () => {
    expect(() => checkUrl('http://localhost:1/', { what: 'u', host: '127.0.0.1' })).not.toThrow();
    expect(() => checkUrl('http://[::1]:1/', { what: 'u', host: 'localhost' })).not.toThrow();
    expect(() =>
      checkUrl('http://localhost:1/', { what: 'u', host: '127.0.0.1', loopbackIsOneHost: false }),
    ).toThrow(/not the only host allowed \(127\.0\.0\.1\)/);
    expect(() => checkUrl('http://127.evil.example/', { what: 'u', host: '127.0.0.1' })).toThrow(NetError);
    expect(() =>
      checkUrl('http://a.example/', { what: 'u', host: 'b.example', hostRole: 'the card host' }),
    ).toThrow(/a\.example is not the card host \(b\.example\)/);
  });
});

describe('guardedFetch against a local server', () => {
  it('fetches and adds default headers without overriding the request', async () => {
    const res = await guardedFetch(
      `${base}/echo-headers`,
      { headers: { 'x-mine': 'request' } },
      { what: 't', headers: { 'x-mine': 'default', 'x-extra': 'added' }, maxBytes: 10_000, buffer: true },
    );
    const headers = (await res.json()) as Record<string, string>;
    expect(headers['x-mine']).toBe('request');
    expect(headers['x-extra']).toBe('added');
  });

  it('refuses a redirect by default, naming it', async () => {
    const err = await refusal(guardedFetch(`${base}/to-ok`, undefined, { what: 'agent' }));
    expect(err.reason).toBe('redirect_refused');
    expect(err.code).toBe('UNAVAILABLE');
    expect(err.message).toMatch(/redirect \(HTTP 302\)/);
  });

  it('follows redirects by hand and refuses one to a metadata address without calling it', async () => {
    const before = seen.length;
    for (const path of ['/to-metadata', '/to-mapped-metadata', '/to-gcp']) {
      const err = await refusal(guardedFetch(`${base}${path}`, undefined, { what: 't', redirects: 3 }));
      expect(err.reason, path).toBe('host_refused');
    }
    expect(
      (await refusal(guardedFetch(`${base}/to-file`, undefined, { what: 't', redirects: 3 }))).reason,
    ).toBe('url_invalid');
    // Only our own server saw requests: nothing went to the redirect targets.
    expect(seen.slice(before).every((s) => s.url !== '/ok')).toBe(true);
  });

  it('follows same-host redirects, and refuses another host under the host rule', async () => {
    const res = await guardedFetch(`${base}/to-ok`, undefined, {
      what: 't',
      redirects: 3,
      host: '127.0.0.1',
    });
    expect(await res.json()).toEqual({ ok: true });
    // localhost is 127.0.0.1 for the default host rule...
    const viaLocalhost = await guardedFetch(`${base}/to-localhost`, undefined, {
      what: 't',
      redirects: 3,
      host: '127.0.0.1',
    });
    expect(viaLocalhost.status).toBe(200);
    // ...but not for the exact one, and never another name.
    const exact = await refusal(
      guardedFetch(`${base}/to-localhost`, undefined, {
        what: 't',
        redirects: 3,
        host: '127.0.0.1',
        loopbackIsOneHost: false,
      }),
    );
    expect(exact.reason).toBe('redirect_refused');
    const other = await refusal(
      guardedFetch(`${base}/to-other-host`, undefined, { what: 't', redirects: 3, host: '127.0.0.1' }),
    );
    expect(other.reason).toBe('redirect_refused');
  });

  it('stops redirect loops and redirects without a Location', async () => {
    const loop = await refusal(guardedFetch(`${base}/loop`, undefined, { what: 't', redirects: 2 }));
    expect(loop.message).toMatch(/more than 2 redirects/);
    const none = await refusal(guardedFetch(`${base}/no-location`, undefined, { what: 't', redirects: 2 }));
    expect(none.message).toMatch(/without a Location/);
  });

  it('turns a POST into a GET on 303', async () => {
    const before = seen.length;
    const res = await guardedFetch(
      `${base}/see-other`,
      { method: 'POST', body: '{}' },
      { what: 't', redirects: 1 },
    );
    expect(res.status).toBe(200);
    expect(seen.slice(before).map((s) => `${s.method} ${s.url}`)).toEqual(['POST /see-other', 'GET /ok']);
  });

  it("'return' hands the 3xx back unfollowed; the next hop is checked when the caller follows it", async () => {
    const fetchIt = createGuardedFetch({ what: 't', redirects: 'return' });
    const res = await fetchIt(`${base}/to-metadata`);
    expect(res.status).toBe(302);
    const err = await refusal(fetchIt(res.headers.get('location')!));
    expect(err.reason).toBe('host_refused');
  });

  it('refuses a body that declares more than the cap, telling onOversize', async () => {
    const told: NetError[] = [];
    const err = await refusal(
      guardedFetch(`${base}/big-declared`, undefined, {
        what: 'srv',
        maxBytes: 65_536,
        onOversize: (e) => told.push(e),
      }),
    );
    expect(err.reason).toBe('too_large');
    expect(err.code).toBe('PAYLOAD_TOO_LARGE');
    expect(err.message).toMatch(/srv: response larger than 65536 bytes refused \(it declares 100000\)/);
    expect(told).toEqual([err]);
  });

  it('cuts an oversize chunked body: at fetch time when buffering, while reading otherwise', async () => {
    const buffered = await refusal(
      guardedFetch(`${base}/big-chunked`, undefined, { what: 't', maxBytes: 65_536, buffer: true }),
    );
    expect(buffered.reason).toBe('too_large');
    const res = await guardedFetch(`${base}/big-chunked`, undefined, { what: 't', maxBytes: 65_536 });
    expect(res.status).toBe(200);
    const err = await refusal(res.text());
    expect(err.message).toMatch(/larger than 65536 bytes/);
    const fits = await guardedFetch(`${base}/big-chunked`, undefined, { what: 't', maxBytes: 200_000 });
    expect((await fits.text()).length).toBe(8 * 16 * 1024);
  });

  it('caps event streams per event, as a whole, or not at all', async () => {
    const perEvent = await guardedFetch(`${base}/sse-small-events`, undefined, { what: 't', maxBytes: 1000 });
    expect((await perEvent.text()).length).toBeGreaterThan(1000);
    const bigEvent = await guardedFetch(`${base}/sse-big-event`, undefined, { what: 't', maxBytes: 1000 });
    expect((await refusal(bigEvent.text())).message).toMatch(/message larger than 1000 bytes/);
    const whole = await guardedFetch(`${base}/sse-small-events`, undefined, {
      what: 't',
      maxBytes: 1000,
      streamCap: 10_000,
    });
    expect((await refusal(whole.text())).message).toMatch(/stream larger than 10000 bytes/);
    const none = await guardedFetch(`${base}/sse-big-event`, undefined, {
      what: 't',
      maxBytes: 1000,
      streamCap: 'none',
      buffer: true,
    });
    expect((await none.text()).length).toBeGreaterThan(5000);
  });

  it('passes null-body answers through', async () => {
    const res = await guardedFetch(`${base}/empty`, undefined, { what: 't', maxBytes: 10, buffer: true });
    expect(res.status).toBe(204);
  });

  it('times out a silent server, and a body that stalls when buffering', async () => {
    const err = await refusal(guardedFetch(`${base}/slow`, undefined, { what: 'slowpoke', timeoutMs: 200 }));
    expect(err.reason).toBe('timeout');
    expect(err.code).toBe('TIMEOUT');
    expect(err.message).toBe('slowpoke took longer than 200 ms');
    const body = await refusal(
      guardedFetch(`${base}/slow-body`, undefined, {
        what: 't',
        timeoutMs: 200,
        maxBytes: 1000,
        buffer: true,
      }),
    );
    expect(body.reason).toBe('timeout');
  });

  it("a caller's abort is not reported as a timeout", async () => {
    const controller = new AbortController();
    const pending = guardedFetch(`${base}/slow`, undefined, {
      what: 't',
      timeoutMs: 5000,
      signal: controller.signal,
    }).catch((e: unknown) => e);
    controller.abort();
    const err = await pending;
    expect(err).not.toBeInstanceOf(NetError);
    expect((err as Error).name).toBe('AbortError');
  });

  it('refuses a URL before any connection', async () => {
    const before = seen.length;
    const err = await refusal(guardedFetch('http://169.254.169.254/latest', undefined, { what: 't' }));
    expect(err.reason).toBe('host_refused');
    expect(seen.length).toBe(before);
  });

  it('uses the wrapped fetch', async () => {
    const calls: string[] = [];
    const fetchIt = createGuardedFetch({
      what: 't',
      fetch: (input) => {
        calls.push(String(input));
        return Promise.resolve(new Response('hi'));
      },
    });
    expect(await (await fetchIt('http://example.invalid/x')).text()).toBe('hi');
    expect(calls).toEqual(['http://example.invalid/x']);
  });
});
