// The SPIFFE identity provider against a real SPIRE server and agent (join-token node attestation,
// unix workload attestor): SVIDs and bundles over the Workload API, JWT-SVID verification with the
// audience checked, and the identity mode rules of decision #18.
import { createServer, type Server } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openIdentity, resolveIdentityMode } from '../../src/identity/identityMode.js';
import { SpiffeIdentity } from '../../src/identity/spiffeIdentity.js';
import { WorkloadApiClient } from '../../src/identity/workloadApiClient.js';
import type { JwtBundlesResponse } from '../../src/identity/workloadApiSchema.js';
import { startTestSpire, TRUST_DOMAIN, type TestSpire } from './spireFixture.js';

const SELF = `spiffe://${TRUST_DOMAIN}/coordinator`;
const OTHER = `spiffe://${TRUST_DOMAIN}/other`;
const uid = process.getuid!();

async function waitUntil<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  ms: number,
  what: string,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
const gid = process.getgid!();

describe('SpiffeIdentity over a real SPIRE agent', () => {
  let spire: TestSpire;
  let identity: SpiffeIdentity;

  beforeAll(async () => {
    spire = await startTestSpire();
    await spire.register({ spiffeId: SELF, selectors: [`unix:uid:${uid}`, `unix:gid:${gid}`] });
    // The agent learns new entries on its next sync: open() waits for the first SVID.
    identity = await SpiffeIdentity.open({ socket: spire.socket, timeoutMs: 60_000 });
  }, 180_000);
  afterAll(async () => {
    await identity?.close();
    await spire?.close();
  });

  it('receives an X.509-SVID for its entry, with the trust bundles', () => {
    expect(identity.agentId).toBe(SELF);
    expect(identity.trustDomain).toBe(TRUST_DOMAIN);
    const svid = identity.x509Svid()!;
    expect(svid.certificates[0]!.subjectAltName).toBe(`URI:${SELF}`);
    expect(svid.expiresAt.getTime()).toBeGreaterThan(Date.now());
    const cas = identity.x509Bundles().get(TRUST_DOMAIN)!;
    expect(cas.length).toBeGreaterThan(0);
    // The leaf is signed by the trust domain's CA (directly or through the chain it came with).
    const chain = svid.certificates;
    expect(chain.at(-1)!.checkIssued(cas[0]!) || cas.some((ca) => chain.at(-1)!.verify(ca.publicKey))).toBe(
      true,
    );
    expect(identity.jwtBundles().get(TRUST_DOMAIN)!.keys.length).toBeGreaterThan(0);
  });

  it('fetches a JWT-SVID that verifies for its audience and is refused for another', async () => {
    const token = await identity.jwtSvid([OTHER]);
    const ok = await identity.verifyJwtSvid(token, OTHER);
    expect(ok).toMatchObject({ ok: true, spiffeId: SELF, audience: [OTHER] });
    // SPIRE agrees (ValidateJWTSVID).
    expect(await identity.validateWithAgent(token, OTHER)).toBe(SELF);
    expect(await identity.verifyJwtSvid(token, `spiffe://${TRUST_DOMAIN}/third`)).toMatchObject({
      ok: false,
      reason: 'wrong_audience',
    });
    const expiresAt = (ok as { expiresAt: number }).expiresAt;
    expect(await identity.verifyJwtSvid(token, OTHER, new Date((expiresAt + 60) * 1000))).toMatchObject({
      ok: false,
      reason: 'expired',
    });
    const [h, p, s] = token.split('.');
    const forged = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(p!, 'base64url').toString()), sub: OTHER }),
    );
    expect(await identity.verifyJwtSvid(`${h}.${forged.toString('base64url')}.${s}`, OTHER)).toMatchObject({
      ok: false,
      reason: 'bad_signature',
    });
  });

  it('follows the bundle stream: a one-shot fetch gives the same JWT keys', async () => {
    const client = new WorkloadApiClient(spire.socket);
    try {
      const bundles = await client.first<JwtBundlesResponse>((cb) => client.watchJwtBundles(cb));
      const jwks = JSON.parse(Buffer.from(Object.values(bundles.bundles)[0]!).toString()) as {
        keys: { kid: string }[];
      };
      expect(jwks.keys.map((k) => k.kid)).toEqual(
        identity
          .jwtBundles()
          .get(TRUST_DOMAIN)!
          .keys.map((k) => k.kid),
      );
    } finally {
      client.close();
    }
    expect(identity.updates.jwtBundles).toBeGreaterThanOrEqual(1);
  });

  it('follows a JWT authority rotation: the new key arrives on the stream and signs new SVIDs', async () => {
    const kids = () =>
      identity
        .jwtBundles()
        .get(TRUST_DOMAIN)!
        .keys.map((k) => k.kid);
    const before = kids();
    const oldToken = await identity.jwtSvid(['rotation-before']);
    const prepared = await spire.serverCommand(['localauthority', 'jwt', 'prepare', '-output', 'json']);
    const authorityId = /"authority_id"\s*:\s*"([^"]+)"/.exec(prepared)?.[1];
    expect(authorityId).toBeDefined();
    // The agent syncs with the server every few seconds and pushes the grown bundle on the stream.
    await waitUntil(() => kids().length > before.length, 60_000, 'rotated JWT bundle');
    await spire.serverCommand(['localauthority', 'jwt', 'activate', '-authorityID', authorityId!]);
    const newKid = kids().find((k) => !before.includes(k))!;
    // New JWT-SVIDs are signed by the new key once the agent has the new authority.
    const client = new WorkloadApiClient(spire.socket);
    const token = await waitUntil(
      async () => {
        const t = (await client.fetchJwtSvid([`rotation-${Date.now()}`])).svids[0]!.svid;
        const kid = (JSON.parse(Buffer.from(t.split('.')[0]!, 'base64url').toString()) as { kid: string })
          .kid;
        return kid === newKid ? t : undefined;
      },
      60_000,
      'JWT-SVID signed by the new authority',
    ).finally(() => client.close());
    const aud = (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { aud: string[] })
      .aud[0]!;
    expect(await identity.verifyJwtSvid(token, aud)).toMatchObject({ ok: true, spiffeId: SELF });
    // Tokens of the old authority stay valid while its key is still in the bundle.
    expect(await identity.verifyJwtSvid(oldToken, 'rotation-before')).toMatchObject({ ok: true });
    expect(identity.updates.jwtBundles).toBeGreaterThanOrEqual(2);
  }, 150_000);

  it('mode rules: socket without explicit mode → SPIFFE; explicit static → static', async () => {
    const env = { SPIFFE_ENDPOINT_SOCKET: spire.socket };
    const spiffe = await openIdentity(null, env, { timeoutMs: 30_000 });
    try {
      expect(spiffe).toMatchObject({ mode: 'spiffe', svidVerified: true, agentId: SELF });
    } finally {
      await spiffe.close();
    }
    expect(resolveIdentityMode('static', env)).toEqual({ mode: 'static' });
  });
});

describe('identity mode rules without a working agent', () => {
  let dir: string;
  let silent: Server;
  const sockets = new Set<import('node:net').Socket>();
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'amf-spiffe-mode-'));
    // A socket that accepts and never speaks gRPC: "present but unavailable".
    silent = createServer((s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => silent.listen(join(dir, 'silent.sock'), r));
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => silent.close(r));
    await rm(dir, { recursive: true, force: true });
  });

  it('AMF_IDENTITY_MODE=spiffe without a socket is a hard failure', async () => {
    await expect(openIdentity('spiffe', {})).rejects.toThrow(/no SPIFFE Workload API socket/);
    await expect(
      openIdentity('spiffe', { SPIFFE_ENDPOINT_SOCKET: `unix://${dir}/none.sock` }),
    ).rejects.toThrow(/refusing to start/);
  });

  it('neither mode nor socket → static, local only', async () => {
    const id = await openIdentity(null, {});
    expect(id).toMatchObject({ mode: 'static', svidVerified: false });
    expect(id.warning).toBeUndefined();
  });

  it('a socket that gives no SVID: explicit spiffe fails, implicit falls back to static with a warning', async () => {
    const env = { SPIFFE_ENDPOINT_SOCKET: `unix://${dir}/silent.sock` };
    await expect(openIdentity('spiffe', env, { timeoutMs: 1_000 })).rejects.toThrow(/refusing to start/);
    const fallback = await openIdentity(null, env, { timeoutMs: 1_000 });
    expect(fallback).toMatchObject({ mode: 'static', svidVerified: false });
    expect(fallback.warning).toMatch(/local visibility only/);
  });
});
