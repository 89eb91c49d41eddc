/**
 * The route table's decisions (http/routeAccess.ts) one request at a time: rules by path and method,
 * loopback peers told apart by address spelling, and under SPIFFE a valid JWT-SVID taken on client
 * routes beyond loopback but never on operator routes. The real-mesh checks are in
 * test/security/operatorRoutes.test.ts.
 */
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { EdgeAuth, isLoopbackPeer, routeAccess } from '../../src/http/routeAccess.js';
import type { IdentityProvider } from '../../src/identity/identityProvider.js';
import { StaticIdentity } from '../../src/identity/identityProvider.js';

const KEY = 'the-operator-key';

function req(method: string, remoteAddress: string, authorization?: string): IncomingMessage {
  return {
    method,
    headers: authorization ? { authorization } : {},
    socket: { remoteAddress },
  } as unknown as IncomingMessage;
}

async function decide(auth: EdgeAuth, method: string, path: string, from: string, authorization?: string) {
  const d = await auth.decide(req(method, from, authorization), new URL(path, 'http://coordinator'));
  return d.ok ? d.caller.kind : (d.error.details as { reason: string }).reason;
}

/** A SPIFFE identity that accepts exactly one token for its own audience. */
function fakeSpiffe(): IdentityProvider {
  const self = 'spiffe://example.org/coordinator';
  const base = new StaticIdentity();
  return Object.assign(Object.create(base) as IdentityProvider, {
    mode: 'spiffe',
    agentId: self,
    trustDomain: 'example.org',
    verifyJwtSvid: (token: string, audience: string) =>
      Promise.resolve(
        token === 'good.svid.token' && audience === self
          ? {
              ok: true,
              spiffeId: 'spiffe://example.org/client',
              trustDomain: 'example.org',
              audience: [self],
              expiresAt: 0,
            }
          : { ok: false, reason: 'bad_signature', message: 'not signed by the trust domain' },
      ),
  });
}

describe('the route table', () => {
  it('gives each path its rule; the method matters only for POST /publish', () => {
    expect(routeAccess('GET', '/').rule).toBe('public');
    expect(routeAccess('GET', '/console/app.js').rule).toBe('public');
    expect(routeAccess('POST', '/v1/chat/completions').rule).toBe('client');
    expect(routeAccess('POST', '/a2a/').rule).toBe('client');
    expect(routeAccess('POST', '/mcp/call').rule).toBe('client');
    expect(routeAccess('POST', '/publish').rule).toBe('client');
    expect(routeAccess('GET', '/publish').rule).toBe('operator');
    expect(routeAccess('GET', '/events/').rule).toBe('operator');
    expect(routeAccess('GET', '/mcp/other').rule).toBe('operator');
    expect(routeAccess('GET', '/api/amp').rule).toBe('operator');
    expect(routeAccess('DELETE', '/agents/x').rule).toBe('operator');
  });

  it('tells loopback peers by address, in every spelling, and nothing else', () => {
    for (const a of ['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1'])
      expect(isLoopbackPeer(a), a).toBe(true);
    for (const a of ['10.0.0.1', '::ffff:10.0.0.1', '192.168.1.5', 'fe80::1', undefined, 'localhost'])
      expect(isLoopbackPeer(a), String(a)).toBe(false);
  });
});

describe('EdgeAuth', () => {
  const auth = new EdgeAuth({ operatorKey: KEY, identity: new StaticIdentity() });

  it('opens client routes to loopback, closes operator routes to anyone without the key', async () => {
    expect(await decide(auth, 'GET', '/v1/models', '127.0.0.1')).toBe('anonymous');
    expect(await decide(auth, 'GET', '/v1/models', '10.0.0.2')).toBe('missing_key');
    expect(await decide(auth, 'GET', '/agents', '127.0.0.1')).toBe('missing_key');
    expect(await decide(auth, 'GET', '/agents', '10.0.0.2', `Bearer ${KEY}`)).toBe('operator');
    expect(await decide(auth, 'GET', '/health', '10.0.0.2', 'Bearer wrong')).toBe('anonymous');
  });

  it('refuses a wrong key wherever it is given, except a placeholder on /v1 from loopback', async () => {
    expect(await decide(auth, 'POST', '/publish', '127.0.0.1', 'Bearer wrong')).toBe('wrong_key');
    expect(await decide(auth, 'POST', '/mcp', '127.0.0.1', 'Bearer wrong')).toBe('wrong_key');
    expect(await decide(auth, 'POST', '/v1/chat/completions', '127.0.0.1', 'Bearer unused')).toBe(
      'anonymous',
    );
    expect(await decide(auth, 'POST', '/v1/chat/completions', '10.0.0.2', 'Bearer unused')).toBe('wrong_key');
    expect(await decide(auth, 'POST', '/v1/chat/completions', '127.0.0.1', 'Basic eDp5')).toBe(
      'unusable_key',
    );
  });

  it('takes ?api_key= on /events only', async () => {
    expect(await decide(auth, 'GET', `/events?api_key=${KEY}`, '127.0.0.1')).toBe('operator');
    expect(await decide(auth, 'GET', `/agents?api_key=${KEY}`, '127.0.0.1')).toBe('unusable_key');
  });

  it('under SPIFFE takes a valid JWT-SVID on client routes beyond loopback, never on operator routes', async () => {
    const spiffe = new EdgeAuth({ operatorKey: KEY, identity: fakeSpiffe() });
    expect(await decide(spiffe, 'POST', '/a2a', '10.0.0.2', 'Bearer good.svid.token')).toBe('svid');
    expect(await decide(spiffe, 'POST', '/a2a', '10.0.0.2', 'Bearer bad.svid.token')).toBe('wrong_key');
    expect(await decide(spiffe, 'GET', '/agents', '10.0.0.2', 'Bearer good.svid.token')).toBe('wrong_key');
    expect(await decide(spiffe, 'GET', '/agents', '10.0.0.2', `Bearer ${KEY}`)).toBe('operator');
    // Without SPIFFE the same token is just a wrong key.
    expect(await decide(auth, 'POST', '/a2a', '10.0.0.2', 'Bearer good.svid.token')).toBe('wrong_key');
  });

  it('refuses in a message that says where the key is', async () => {
    const d = await auth.decide(req('GET', '127.0.0.1'), new URL('/tasks', 'http://c'));
    expect(d.ok).toBe(false);
    if (d.ok) return;
    expect(d.error.code).toBe('UNAUTHORIZED');
    expect(d.error.message).toMatch(/GET \/tasks needs the operator key even from loopback/);
    expect(d.error.message).toContain('<data-dir>/operator.key');
    expect(d.error.message).toContain('AMF_API_KEY');
    expect(d.wwwAuthenticate).toBe('Bearer realm="amf"');
  });
});
