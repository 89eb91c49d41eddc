/**
 * Invites: how a machine that does not share the coordinator's data dir joins the mesh. `amf invite`
 * asks the coordinator for one; it is a compact JWT signed with the coordinator's own key
 * (identity/coordinatorKey.ts) that carries everything the joiner needs: the coordinator's URL, the
 * NATS URL, the tags it may serve, its expiry, and (as its issuer) the coordinator's public key, which
 * the joiner trusts from then on. It is redeemed once: the first agent key that presents it (with a
 * signature proving it holds that key) is enrolled, and the invite's id is recorded in a KV bucket
 * with compare-and-create, so two coordinators on one cluster cannot both hand it out. The same key
 * presenting it again (a retry) is answered the same; any other key is refused.
 */
import { randomUUID } from 'node:crypto';
import type { KV } from '@nats-io/kv';
import { AmfError } from '../errors.js';
import type { AgentKey } from '../identity/agentKey.js';
import { isNkeyUser, userPublicKey } from '../identity/nkeyPublic.js';
import { ed25519 } from '../identity/ed25519.js';
import { issueToken, TokenRefused, verifyToken } from '../identity/signedToken.js';
import {
  checkTags,
  claimsOf,
  DEFAULT_INVITE_TTL_SECONDS,
  INVITE_AUDIENCE,
  joinProofText,
  type InviteClaims,
} from '../identity/inviteToken.js';

export { DEFAULT_INVITE_TTL_SECONDS };
import { MAX_INVITE_TTL_SECONDS } from '../fabric/jetstream.js';

/** What the coordinator needs to mint and redeem invites. */
export interface InviteDeps {
  key: AgentKey;
  store: KV;
  coordinatorUrl: () => string;
  natsUrl: () => string;
  /** Makes `nkey` a proven agent key (granted its own NATS user, judged as a proven agent). */
  enroll: (enrollment: {
    nkey: string;
    tags: string[];
    name: string;
    inviteId: string;
    /** The invite's expiry: a key enrolled but never used loses its login then. */
    expiresAt: Date;
  }) => Promise<void>;
}

/** A redemption request: the invite, the joiner's key and its proof of holding it. */
export interface JoinRequest {
  invite: string;
  nkey: string;
  name: string;
  tags: string[];
  /** Ed25519 signature (base64url) by `nkey` over {@link joinProofText}. */
  proof: string;
}

/** Parses a duration like `90s`, `30m`, `1h`, `7d` (or plain seconds) into seconds. */
export function parseInviteTtl(text: string): number {
  const m = /^(\d{1,7})([smhd]?)$/.exec(text.trim());
  if (!m) throw new AmfError('INVALID_REQUEST', `invalid ttl "${text}": expected e.g. 90s, 30m, 1h or 7d`);
  const seconds = Number(m[1]) * ({ s: 1, m: 60, h: 3600, d: 86400, '': 1 } as const)[m[2] as 's'];
  if (seconds < 60 || seconds > MAX_INVITE_TTL_SECONDS)
    throw new AmfError('INVALID_REQUEST', `ttl must be between 1 minute and 7 days, not ${text}`);
  return seconds;
}

/** Mints an invite for `tags` (empty = any) that lives `ttlSeconds`. */
export function mintInvite(
  deps: InviteDeps,
  tags: unknown,
  ttlSeconds: number,
): { token: string; claims: InviteClaims } {
  const scope = checkTags(tags, 'tags');
  const id = randomUUID();
  const now = Date.now();
  const token = issueToken(
    deps.key,
    {
      audience: INVITE_AUDIENCE,
      ttlSeconds,
      extra: {
        amf_invite: id,
        amf_coordinator: deps.coordinatorUrl(),
        amf_nats: deps.natsUrl(),
        amf_tags: scope,
      },
    },
    now,
  );
  return {
    token,
    claims: {
      id,
      coordinatorUrl: deps.coordinatorUrl(),
      natsUrl: deps.natsUrl(),
      coordinatorKey: deps.key.publicKey,
      tags: scope,
      expiresAt: new Date(now + ttlSeconds * 1000),
    },
  };
}

/** Parses a join request body (bounded and typed), or throws INVALID_REQUEST saying what is wrong. */
export function parseJoinRequest(body: Record<string, unknown>): JoinRequest {
  const { invite, nkey, name, tags, proof } = body;
  if (typeof invite !== 'string' || invite.length > 8192)
    throw new AmfError('INVALID_REQUEST', '"invite" must be the token `amf invite` printed');
  if (!isNkeyUser(nkey))
    throw new AmfError('INVALID_REQUEST', '"nkey" must be the agent\'s nkey public key (U…)');
  if (typeof name !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(name))
    throw new AmfError('INVALID_REQUEST', '"name" must be the agent name ([A-Za-z0-9._-]{1,64})');
  if (typeof proof !== 'string' || !/^[A-Za-z0-9_-]{86}$/.test(proof))
    throw new AmfError('INVALID_REQUEST', '"proof" must be an Ed25519 signature (base64url)');
  return { invite, nkey: nkey as string, name, tags: checkTags(tags, '"tags"'), proof };
}

/**
 * Redeems an invite for the joiner's key: checks the token (this coordinator's key, not expired),
 * the proof of key possession, the tag scope and that no other key used it; then enrolls the key.
 */
export async function redeemInvite(deps: InviteDeps, request: JoinRequest): Promise<InviteClaims> {
  let claims: InviteClaims;
  try {
    claims = claimsOf(
      await verifyToken(request.invite, deps.key.publicKey, INVITE_AUDIENCE),
      deps.key.publicKey,
    );
  } catch (err) {
    if (err instanceof AmfError) throw err;
    const expired = err instanceof TokenRefused && err.reason === 'expired';
    throw new AmfError(
      'UNAUTHORIZED',
      expired
        ? 'the invite has expired: ask the operator for a new one (amf invite)'
        : `the invite was not issued by this coordinator (${(err as Error).message})`,
      { reason: expired ? 'invite_expired' : 'invite_invalid' },
    );
  }
  const proven = ed25519.verify(
    userPublicKey(request.nkey),
    new TextEncoder().encode(joinProofText(claims.id, request.nkey)),
    Buffer.from(request.proof, 'base64url'),
  );
  if (!proven)
    throw new AmfError(
      'UNAUTHORIZED',
      'the proof does not verify: the joiner must sign with the key it names',
      {
        reason: 'join_proof_invalid',
      },
    );
  const outside = claims.tags.length > 0 ? request.tags.filter((t) => !claims.tags.includes(t)) : [];
  if (outside.length > 0)
    throw new AmfError(
      'FORBIDDEN',
      `this invite allows tags ${claims.tags.join(', ')}, not ${outside.join(', ')}: ask for an invite with --tags`,
      { reason: 'invite_scope' },
    );
  const record = JSON.stringify({ nkey: request.nkey, name: request.name, at: new Date().toISOString() });
  try {
    await deps.store.create(claims.id, record);
  } catch {
    const previous = await deps.store.get(claims.id);
    const holder = previous ? (previous.json<{ nkey?: string }>().nkey ?? '') : '';
    if (holder !== request.nkey)
      throw new AmfError(
        'FORBIDDEN',
        'this invite was already used by another agent: ask for a new one (amf invite)',
        {
          reason: 'invite_used',
        },
      );
  }
  await deps.enroll({
    nkey: request.nkey,
    tags: request.tags,
    name: request.name,
    inviteId: claims.id,
    expiresAt: claims.expiresAt,
  });
  return claims;
}
