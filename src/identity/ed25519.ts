/**
 * Ed25519 signing and verification for the task path, where every claim and final is signed by its
 * worker and checked by the coordinator (docs/security.md). libsodium (sodium-native, prebuilt for
 * the common platforms) does both faster than node:crypto's OpenSSL 3.0, and the task path spends
 * much of its CPU on them (docs/performance.md, "What dominates the cost").
 * Where the native module cannot load, node:crypto does the same work. Ed25519 signatures are
 * deterministic, so both give the same bytes. libsodium also refuses a few degenerate signatures
 * that OpenSSL accepts (small-order keys and points); none can be made without the private key.
 */
import {
  createPrivateKey,
  createPublicKey,
  sign as nodeSign,
  verify as nodeVerify,
  type KeyObject,
} from 'node:crypto';
import { createRequire } from 'node:module';
import { AmfError } from '../errors.js';

/** The part of sodium-native used here. */
export interface Sodium {
  crypto_sign_BYTES: number;
  crypto_sign_PUBLICKEYBYTES: number;
  crypto_sign_SECRETKEYBYTES: number;
  crypto_sign_seed_keypair(publicKey: Buffer, secretKey: Buffer, seed: Buffer): void;
  crypto_sign_detached(signature: Buffer, message: Buffer, secretKey: Buffer): void;
  crypto_sign_verify_detached(signature: Buffer, message: Buffer, publicKey: Buffer): boolean;
  sodium_malloc(size: number): Buffer;
}

/** sodium-native, unless it cannot load here (or `AMF_ED25519=node` asks for node:crypto). */
export function loadSodium(env: NodeJS.ProcessEnv = process.env): Sodium | undefined {
  if (env.AMF_ED25519 === 'node') return undefined;
  try {
    return createRequire(import.meta.url)('sodium-native') as Sodium;
  } catch {
    return undefined;
  }
}

export interface Ed25519 {
  /** Which implementation signs and verifies (`amf doctor`, benchmarks). */
  readonly backend: 'libsodium' | 'node:crypto';
  /** Signs with the key of a 32-byte seed; throws when the seed does not give `publicKey`. */
  signer(seed: Uint8Array, publicKey: Uint8Array): (data: Uint8Array) => Buffer;
  /** Whether `signature` is `publicKey`'s over `data`; false (never a throw) on malformed input. */
  verify(
    publicKey: { raw: Uint8Array; keyObject: () => KeyObject },
    data: Uint8Array,
    signature: Uint8Array,
  ): boolean;
}

/** Ed25519 over libsodium when given, else over node:crypto. */
export function createEd25519(sodium: Sodium | undefined): Ed25519 {
  return {
    backend: sodium ? 'libsodium' : 'node:crypto',
    signer: (seed, publicKey) => {
      if (seed.length !== 32 || publicKey.length !== 32)
        throw new AmfError('INVALID_REQUEST', 'an Ed25519 seed and key are 32 bytes');
      return sodium ? sodiumSigner(sodium, seed, publicKey) : nodeSigner(seed, publicKey);
    },
    verify: (publicKey, data, signature) => {
      if (signature.length !== 64 || publicKey.raw.length !== 32) return false;
      if (sodium)
        return sodium.crypto_sign_verify_detached(
          asBuffer(signature),
          asBuffer(data),
          asBuffer(publicKey.raw),
        );
      try {
        return nodeVerify(null, data, publicKey.keyObject(), signature);
      } catch {
        return false;
      }
    },
  };
}

function sodiumSigner(sodium: Sodium, seed: Uint8Array, publicKey: Uint8Array): (data: Uint8Array) => Buffer {
  const pk = Buffer.alloc(sodium.crypto_sign_PUBLICKEYBYTES);
  const sk = secretKeyBuffer(sodium);
  sodium.crypto_sign_seed_keypair(pk, sk, Buffer.from(seed));
  if (!pk.equals(Buffer.from(publicKey)))
    throw new AmfError('INVALID_REQUEST', 'the Ed25519 seed does not match its public key');
  return (data) => {
    const signature = Buffer.alloc(sodium.crypto_sign_BYTES);
    sodium.crypto_sign_detached(signature, asBuffer(data), sk);
    return signature;
  };
}

/**
 * Guarded memory for a secret key (locked, not swapped out, guard pages around it); plain memory
 * where the process may lock no more (a container's RLIMIT_MEMLOCK), rather than no key at all.
 */
function secretKeyBuffer(sodium: Sodium): Buffer {
  try {
    return sodium.sodium_malloc(sodium.crypto_sign_SECRETKEYBYTES);
  } catch {
    return Buffer.alloc(sodium.crypto_sign_SECRETKEYBYTES);
  }
}

function nodeSigner(seed: Uint8Array, publicKey: Uint8Array): (data: Uint8Array) => Buffer {
  const x = Buffer.from(publicKey).toString('base64url');
  const privateKey = createPrivateKey({
    key: { kty: 'OKP', crv: 'Ed25519', d: Buffer.from(seed).toString('base64url'), x },
    format: 'jwk',
  });
  if (createPublicKey(privateKey).export({ format: 'jwk' }).x !== x)
    throw new AmfError('INVALID_REQUEST', 'the Ed25519 seed does not match its public key');
  return (data) => nodeSign(null, data, privateKey);
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** This process's Ed25519. */
export const ed25519: Ed25519 = createEd25519(loadSodium());
