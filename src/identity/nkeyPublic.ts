/**
 * NATS nkey user public keys (`U` + base32 of the 32-byte Ed25519 key and a CRC16): checked by
 * nkeys.js, turned into node:crypto key objects here (cached: the coordinator verifies every event).
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { nkeys } from '@nats-io/transport-node';
import { AmfError } from '../errors.js';

/** The shape of an nkey user public key; the checksum is verified by {@link publicKeyObject}. */
export const NKEY_USER_PATTERN = /^U[A-Z2-7]{55}$/;

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
/** A checked user key: its raw 32 bytes, and a node:crypto key object made on first use. */
export interface UserPublicKey {
  readonly raw: Uint8Array;
  keyObject(): KeyObject;
}

const cache = new Map<string, UserPublicKey>();
const CACHE_LIMIT = 10_000;

/** True when `value` is a well-formed nkey user public key with a valid checksum. */
export function isNkeyUser(value: unknown): boolean {
  if (typeof value !== 'string' || !NKEY_USER_PATTERN.test(value)) return false;
  // A key already decoded passed the checksum: no need to decode it again.
  if (cache.has(value)) return true;
  try {
    nkeys.fromPublic(value);
    return true;
  } catch {
    return false;
  }
}

/** The Ed25519 key of an nkey user public key (cached: the coordinator checks every event); throws when it is not one. */
export function userPublicKey(publicKey: string): UserPublicKey {
  const hit = cache.get(publicKey);
  if (hit) return hit;
  if (!isNkeyUser(publicKey))
    throw new AmfError('INVALID_REQUEST', `not an nkey user public key: ${publicKey.slice(0, 64)}`);
  // Decoded: one prefix byte, the 32 key bytes, a two-byte CRC (checked by nkeys.js above).
  const raw = base32Decode(publicKey).subarray(1, 33);
  let keyObject: KeyObject | undefined;
  const entry: UserPublicKey = {
    raw,
    keyObject: () =>
      (keyObject ??= createPublicKey({
        key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(raw).toString('base64url') },
        format: 'jwk',
      })),
  };
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(publicKey, entry);
  return entry;
}

/** The Ed25519 public key of an nkey user public key as a node:crypto key; throws when it is not one. */
export function publicKeyObject(publicKey: string): KeyObject {
  return userPublicKey(publicKey).keyObject();
}

/**
 * The Ed25519 public key of any nkey public key (server `N…`, account `A…`, user `U…`); the prefix
 * and checksum are checked by nkeys.js. Not cached: for the few keys of servers and issuers.
 */
export function anyPublicKeyObject(publicKey: string): KeyObject {
  if (publicKey.startsWith('U')) return publicKeyObject(publicKey);
  nkeys.fromPublic(publicKey);
  const raw = base32Decode(publicKey).subarray(1, 33);
  return createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(raw).toString('base64url') },
    format: 'jwk',
  });
}

/** The 32 raw Ed25519 seed bytes of an encoded nkey seed (two prefix bytes, seed, CRC). */
export function rawSeed(seedText: string): Uint8Array {
  return base32Decode(seedText).subarray(2, 34);
}

function base32Decode(text: string): Uint8Array {
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const ch of text) {
    value = (value << 5) | ALPHABET.indexOf(ch);
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Uint8Array.from(out);
}
