// Ed25519 over libsodium and over node:crypto: the same signatures from the same seed, each verifies
// the other's, and both refuse a changed message, another key and malformed input. libsodium must
// load here (the prebuilt sodium-native), or the task path silently runs at node:crypto's speed.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createEd25519, ed25519, loadSodium } from '../../src/identity/ed25519.js';
import { createEphemeralAgentKey } from '../../src/identity/agentKey.js';
import { userPublicKey } from '../../src/identity/nkeyPublic.js';
import { nkeys } from '@nats-io/transport-node';
import { rawSeed } from '../../src/identity/nkeyPublic.js';

describe('Ed25519 backends', () => {
  const sodium = loadSodium({});
  const fast = createEd25519(sodium);
  const plain = createEd25519(undefined);

  it('uses libsodium in this process, and node:crypto when asked to', () => {
    expect(sodium).toBeDefined();
    expect(ed25519.backend).toBe('libsodium');
    expect(loadSodium({ AMF_ED25519: 'node' })).toBeUndefined();
    expect(plain.backend).toBe('node:crypto');
  });

  it('signs alike from one seed, and each verifies the other’s signature', () => {
    const pair = nkeys.createUser();
    const seedText = new TextDecoder().decode(pair.getSeed());
    const pub = userPublicKey(pair.getPublicKey());
    const message = randomBytes(700);
    const a = fast.signer(rawSeed(seedText), pub.raw)(message);
    const b = plain.signer(rawSeed(seedText), pub.raw)(message);
    expect(a.equals(b)).toBe(true);
    for (const impl of [fast, plain]) {
      expect(impl.verify(pub, message, a)).toBe(true);
      const changed = Buffer.from(message);
      changed[10] = (changed[10]! + 1) % 256;
      expect(impl.verify(pub, changed, a)).toBe(false);
      expect(impl.verify(userPublicKey(createEphemeralAgentKey().publicKey), message, a)).toBe(false);
      expect(impl.verify(pub, message, a.subarray(0, 63))).toBe(false);
      expect(impl.verify(pub, message, Buffer.alloc(64))).toBe(false);
    }
  });

  it('refuses a seed that does not give the public key it is loaded with', () => {
    const one = nkeys.createUser();
    const other = userPublicKey(nkeys.createUser().getPublicKey());
    const seed = rawSeed(new TextDecoder().decode(one.getSeed()));
    for (const impl of [fast, plain]) {
      expect(() => impl.signer(seed, other.raw)).toThrow(/does not match/);
      expect(() => impl.signer(seed.subarray(0, 31), other.raw)).toThrow(/32 bytes/);
    }
  });

  it('signs an agent’s events so that nkeys.js, NATS’s own implementation, verifies them', () => {
    const key = createEphemeralAgentKey();
    const message = new TextEncoder().encode('an event');
    const signature = Buffer.from(key.sign(message), 'base64url');
    expect(nkeys.fromPublic(key.publicKey).verify(message, signature)).toBe(true);
  });
});
