// The auth callout's pieces without a server: the request checks (signature, signer, size, type), the
// nonce signature check, the issuer key file, the nonce anchor key, and the config the nodes get.
// The whole path against a real nats-server is test/fabric/authCallout.test.ts.
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createAccount,
  createCurve,
  createServer,
  createUser,
  decode,
  encode,
  Algorithms,
  fromPublic,
} from '@nats-io/jwt';
import {
  calloutKeyFile,
  CALLOUT_XKEY_FILE,
  loadOrCreateCalloutIssuer,
  readCalloutIssuer,
} from '../../src/identity/calloutIssuer.js';
import { NONCE_ANCHOR_NKEY } from '../../src/fabric/nonceAnchor.js';
import {
  encodeCalloutResponse,
  MAX_AUTH_REQUEST_BYTES,
  nonceSignatureValid,
  readAuthorizationRequest,
} from '../../src/identity/calloutJwt.js';
import { decideLogin } from '../../src/coordinator/authCallout.js';
import { agentPermissions } from '../../src/fabric/agentUsers.js';
import { renderNatsConfig } from '../../src/fabric/natsServer/config.js';
import type { NatsCredentials } from '../../src/fabric/credentials.js';

const server = createServer();
const te = new TextEncoder();

/** An authorization request as nats-server writes it, signed by `signer` (default: the server). */
async function request(
  nats: Record<string, unknown>,
  opts: { signer?: ReturnType<typeof createServer>; iss?: string; aud?: string } = {},
): Promise<Uint8Array> {
  const signer = opts.signer ?? server;
  const now = Math.floor(Date.now() / 1000);
  const jwt = await encode(
    Algorithms.v2,
    {
      aud: opts.aud ?? 'nats-authorization-request',
      jti: 'x',
      iat: now,
      exp: now + 2,
      iss: opts.iss ?? signer.getPublicKey(),
      name: '',
      sub: createAccount().getPublicKey(),
      nats: {
        server_id: { id: server.getPublicKey(), name: 'n1', host: '127.0.0.1' },
        user_nkey: createUser().getPublicKey(),
        type: 'authorization_request',
        version: 2,
        ...nats,
      },
    },
    signer,
  );
  return te.encode(jwt);
}

const credentials: NatsCredentials = {
  coordinator: { user: 'amf-coordinator', password: 'c-pass' },
  specialist: { user: 'amf-specialist', password: 's-pass' },
  watcher: { user: 'amf-watcher', password: 'w-pass' },
  connector: { user: 'amf-connector', password: 'n-pass' },
};
const joinCred = { user: 'amf-join', password: 'j-pass' };

describe('authorization requests', () => {
  it('reads a request signed by the server it names', async () => {
    const req = readAuthorizationRequest(
      await request({ connect_opts: { user: 'amf-join', pass: 'p' }, client_info: { nonce: 'abc' } }),
    );
    expect(req.serverKey).toBe(server.getPublicKey());
    expect(req.user).toBe('amf-join');
    expect(req.nonce).toBe('abc');
  });

  it('refuses a request signed by another key, of another type, or too large', async () => {
    // Signed correctly, but by a key that is not the server named in server_id.
    await expect(async () =>
      readAuthorizationRequest(await request({}, { signer: createServer() })),
    ).rejects.toThrow(/not signed by the server/);
    // A tampered payload no longer matches its signature.
    const good = new TextDecoder().decode(await request({ connect_opts: { user: 'a' } }));
    const [h, , s] = good.split('.');
    const body = Buffer.from(JSON.stringify({ ...decode(good), name: 'changed' })).toString('base64url');
    expect(() => readAuthorizationRequest(te.encode(`${h}.${body}.${s}`))).toThrow(/not a signed NATS JWT/);
    await expect(async () =>
      readAuthorizationRequest(await request({}, { aud: 'something-else' })),
    ).rejects.toThrow(/not an authorization request/);
    expect(() => readAuthorizationRequest(new Uint8Array(MAX_AUTH_REQUEST_BYTES + 1))).toThrow(/exceeds/);
    await expect(async () =>
      readAuthorizationRequest(await request({ connect_opts: { pass: 'x'.repeat(2000) } })),
    ).rejects.toThrow(/longer than/);
  });
});

describe('login decisions', () => {
  const agent = createUser();
  const nonce = 'n0nce-from-server';
  const sig = Buffer.from(agent.sign(te.encode(nonce))).toString('base64');
  const live = (nkey: string) =>
    nkey === agent.getPublicKey() ? { agentId: 'agent-1', tags: ['alpha'] } : undefined;
  const base = { credentials, join: joinCred, liveAgent: live, ttlSeconds: 60 };
  const req = (fields: Record<string, string>) =>
    ({
      serverKey: server.getPublicKey(),
      serverName: 'n1',
      userNkey: createUser().getPublicKey(),
      ...fields,
    }) as const;

  it('checks the nonce signature in both base64 alphabets', () => {
    expect(nonceSignatureValid(agent.getPublicKey(), nonce, sig)).toBe(true);
    expect(
      nonceSignatureValid(agent.getPublicKey(), nonce, Buffer.from(sig, 'base64').toString('base64url')),
    ).toBe(true);
    expect(nonceSignatureValid(agent.getPublicKey(), 'another nonce', sig)).toBe(false);
    expect(nonceSignatureValid(createUser().getPublicKey(), nonce, sig)).toBe(false);
  });

  it('grants a live agent its tags only, refuses forged, unsigned and unknown keys', () => {
    const granted = decideLogin(req({ nkey: agent.getPublicKey(), nonce, sig }), base);
    expect(granted).toEqual({
      name: 'agent-1',
      permissions: agentPermissions({ nkey: agent.getPublicKey(), tags: ['alpha'] }),
      ttlSeconds: 60,
    });
    const other = createUser();
    const otherSig = Buffer.from(other.sign(te.encode(nonce))).toString('base64');
    expect(decideLogin(req({ nkey: agent.getPublicKey(), nonce, sig: otherSig }), base)).toMatchObject({
      refusal: 'bad_signature',
    });
    expect(decideLogin(req({ nkey: agent.getPublicKey() }), base)).toMatchObject({ refusal: 'no_nonce' });
    expect(decideLogin(req({ nkey: other.getPublicKey(), nonce, sig: otherSig }), base)).toMatchObject({
      refusal: 'key_not_admitted',
    });
  });

  it('checks passwords of the roles and the join user', () => {
    expect(decideLogin(req({ user: 'amf-watcher', pass: 'w-pass' }), base)).toMatchObject({
      name: 'amf-watcher',
    });
    expect(decideLogin(req({ user: 'amf-join', pass: 'j-pass' }), base)).toMatchObject({ name: 'amf-join' });
    expect(decideLogin(req({ user: 'amf-join', pass: 'j-pasS' }), base)).toMatchObject({
      refusal: 'wrong_password',
    });
    expect(decideLogin(req({ user: 'amf-coordinator' }), base)).toMatchObject({ refusal: 'wrong_password' });
    expect(decideLogin(req({ user: 'mallory', pass: 'x' }), base)).toMatchObject({ refusal: 'unknown_user' });
    expect(decideLogin(req({}), base)).toMatchObject({ refusal: 'no_credentials' });
  });

  it('answers with a user JWT for the server’s user key, signed by the issuer, expiring after the TTL', async () => {
    const issuer = createAccount();
    const r = req({});
    const now = 1_800_000_000;
    const perms = agentPermissions({ nkey: agent.getPublicKey(), tags: ['alpha'] });
    const response = decode<{ jwt: string }>(
      await encodeCalloutResponse(r, issuer, { name: 'agent-1', permissions: perms, ttlSeconds: 300 }, now),
    );
    expect(response.iss).toBe(issuer.getPublicKey());
    expect(response.aud).toBe(server.getPublicKey());
    expect(response.sub).toBe(r.userNkey);
    const user = decode<{ pub: { allow: string[] }; resp: { max: number } }>(response.nats.jwt!);
    expect(user.sub).toBe(r.userNkey);
    expect(user.aud).toBe('$G');
    expect(user.exp).toBe(now + 300);
    expect(user.nats.pub?.allow).toContain('$JS.API.CONSUMER.MSG.NEXT.AMF_WORK.workers_alpha');
    expect(user.nats.resp?.max).toBe(1);
    const refused = decode<{ error: string; jwt?: string }>(
      await encodeCalloutResponse(r, issuer, { error: 'no' }),
    );
    expect(refused.nats.error).toBe('no');
    expect(refused.nats.jwt).toBeUndefined();
  });
});

describe('the issuer key and the server config', () => {
  const dirs: string[] = [];
  afterAll(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  it('creates the issuer seed once, 0600, and reads the same key back', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'amf-callout-key-'));
    dirs.push(dir);
    const file = calloutKeyFile(dir, {});
    expect(await readCalloutIssuer(file)).toBeUndefined();
    const first = await loadOrCreateCalloutIssuer(file);
    expect(first.publicKey).toMatch(/^A[A-Z2-7]{55}$/);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await loadOrCreateCalloutIssuer(file)).publicKey).toBe(first.publicKey);
    expect(calloutKeyFile(dir, { AMF_CALLOUT_KEY_FILE: '/elsewhere/k' })).toBe('/elsewhere/k');
    // The curve key beside it: created with it, 0600, the same on every load.
    expect(first.xkeyPublicKey).toMatch(/^X[A-Z2-7]{55}$/);
    expect((await stat(join(dir, CALLOUT_XKEY_FILE))).mode & 0o777).toBe(0o600);
    expect((await readCalloutIssuer(file))?.xkeyPublicKey).toBe(first.xkeyPublicKey);
  });

  it('derives a valid nkey user as the nonce anchor', () => {
    expect(NONCE_ANCHOR_NKEY).toMatch(/^U[A-Z2-7]{55}$/);
    // fromPublic checks the prefix and the CRC.
    expect(fromPublic(NONCE_ANCHOR_NKEY).getPublicKey()).toBe(NONCE_ANCHOR_NKEY);
  });

  it('renders the callout block with the role users as auth_users and the anchor user', () => {
    const issuer = createAccount().getPublicKey();
    const text = renderNatsConfig({
      host: '127.0.0.1',
      port: 4222,
      storeDir: '/tmp/x',
      credentials,
      authCallout: { issuer },
      specialistUser: false,
    });
    expect(text).toContain(`issuer: "${issuer}"`);
    expect(text).toContain('auth_users: ["amf-coordinator", "amf-watcher", "amf-connector"]');
    expect(text).toContain(`{ nkey: "${NONCE_ANCHOR_NKEY}", permissions: { publish: { deny: [">"] }`);
    expect(() =>
      renderNatsConfig({ host: 'h', port: 1, storeDir: '/x', credentials, authCallout: { issuer: 'nope' } }),
    ).toThrow(/invalid auth callout issuer/);
    expect(text).not.toContain('xkey');
  });

  it('names the mesh’s curve key as the callout xkey when given, and refuses anything else', () => {
    const issuer = createAccount().getPublicKey();
    const xkey = createCurve().getPublicKey();
    const render = (x: string) =>
      renderNatsConfig({ host: 'h', port: 1, storeDir: '/x', credentials, authCallout: { issuer, xkey: x } });
    expect(render(xkey)).toContain(`xkey: "${xkey}"`);
    // An account key is not a curve key: the server would refuse to start, so the renderer does first.
    expect(() => render(issuer)).toThrow(/invalid auth callout xkey/);
  });
});
