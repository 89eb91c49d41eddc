/**
 * The invite token (`amf invite`) as both sides read it: a compact JWT signed with the coordinator's
 * key, audience `amf:join`, carrying the coordinator's URL, the NATS URL, the tag scope and its id.
 * The coordinator mints and redeems it (coordinator/invites.ts); the joiner reads it here.
 */
import { AmfError } from '../errors.js';
import { isCapabilityTag } from '../events/subjects.js';
import { isNkeyUser } from './nkeyPublic.js';
import { TokenRefused, verifyToken } from './signedToken.js';

/** The audience of every invite: nothing else accepts these tokens. */
export const INVITE_AUDIENCE = 'amf:join';
/** Default lifetime of an invite. */
export const DEFAULT_INVITE_TTL_SECONDS = 3600;

/** What an invite grants, as the coordinator signs it. */
export interface InviteClaims {
  id: string;
  coordinatorUrl: string;
  natsUrl: string;
  /** The coordinator's public key (the token's issuer). */
  coordinatorKey: string;
  /** Tags the joiner may serve; empty = any. */
  tags: string[];
  expiresAt: Date;
}

/** What the joiner signs: binds its key to this one invite. */
export function joinProofText(inviteId: string, nkey: string): string {
  return `amf-join\n${inviteId}\n${nkey}`;
}

/** Tags as an invite or a join request lists them (checked and bounded). */
export function checkTags(tags: unknown, what: string): string[] {
  if (
    !Array.isArray(tags) ||
    tags.length > 64 ||
    !tags.every((t) => typeof t === 'string' && isCapabilityTag(t))
  )
    throw new AmfError(
      'INVALID_REQUEST',
      `${what} must be a list of capability tags ([a-z0-9-]+), at most 64`,
    );
  return tags as string[];
}

/**
 * Reads an invite's claims WITHOUT trusting them: the joiner's side, which learns the coordinator's key
 * from the token it was handed out of band, and checks that the token is signed by that key.
 */
export async function readInvite(token: string): Promise<InviteClaims> {
  const parts = token.trim().split('.');
  if (parts.length !== 3)
    throw new AmfError('INVALID_REQUEST', 'not an AMF invite (expected a token from `amf invite`)');
  let payload: Record<string, unknown>;
  try {
    payload = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
  } catch {
    throw new AmfError('INVALID_REQUEST', 'not an AMF invite: its payload is not JSON');
  }
  const iss = payload.iss;
  if (typeof iss !== 'string' || !isNkeyUser(iss))
    throw new AmfError('INVALID_REQUEST', 'not an AMF invite: no coordinator key as issuer');
  const verified = await verifyToken(token.trim(), iss, INVITE_AUDIENCE).catch((err: unknown) => {
    throw new AmfError(
      'UNAUTHORIZED',
      err instanceof TokenRefused && err.reason === 'expired'
        ? 'this invite has expired: ask the operator for a new one (amf invite)'
        : `this invite is not valid: ${(err as Error).message}`,
    );
  });
  return claimsOf(verified, iss);
}

export function claimsOf(payload: Record<string, unknown>, issuer: string): InviteClaims {
  const { amf_invite: id, amf_coordinator: coordinatorUrl, amf_nats: natsUrl, amf_tags: tags, exp } = payload;
  if (
    typeof id !== 'string' ||
    typeof coordinatorUrl !== 'string' ||
    typeof natsUrl !== 'string' ||
    typeof exp !== 'number'
  )
    throw new AmfError('INVALID_REQUEST', 'not an AMF invite: claims missing');
  return {
    id,
    coordinatorUrl,
    natsUrl,
    coordinatorKey: issuer,
    tags: checkTags(tags, 'the invite tags'),
    expiresAt: new Date(exp * 1000),
  };
}
