/**
 * An agent's own key: an NATS nkey pair (Ed25519, user prefix `U`) that the agent generates on its
 * first start and keeps in a file only it reads (0600). The public key travels in its
 * advertisement and is bound to its agent id at admission; with it the agent authenticates to NATS
 * (nkey challenge) and signs every event it sends. The seed never leaves the file and this object.
 */
import type { KeyObject } from 'node:crypto';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { nkeys } from '@nats-io/transport-node';
import { ed25519 } from './ed25519.js';
import { rawSeed, userPublicKey } from './nkeyPublic.js';
import { AmfError } from '../errors.js';

/** A loaded key pair; `seed` is what the nats.js nkey authenticator needs. */
export interface AgentKey {
  /** The nkey public key (`U` + 55 base32 characters): the agent's name on the fabric. */
  readonly publicKey: string;
  /** The encoded seed (`SU…`), for the NATS nkey authenticator only. */
  readonly seed: Uint8Array;
  /** Ed25519 signature of `data`, base64url. */
  sign(data: Uint8Array): string;
  /** The public half as a node:crypto key (verification). */
  readonly publicKeyObject: KeyObject;
}

const SEED_PATTERN = /^SU[A-Z2-7]{56}$/;

function fromSeedText(text: string, source: string): AgentKey {
  const seedText = text.trim();
  if (!SEED_PATTERN.test(seedText))
    throw new AmfError('CONFIG_INVALID', `${source} does not hold an nkey user seed (SU…)`);
  const seed = new TextEncoder().encode(seedText);
  const pair = nkeys.fromSeed(seed);
  const publicKey = pair.getPublicKey();
  const pub = userPublicKey(publicKey);
  // libsodium or node:crypto (ed25519.ts) sign far faster than the pure-JS Ed25519 of nkeys.js;
  // the key is the same, and a seed that does not give this public key is refused.
  let sign: (data: Uint8Array) => Buffer;
  try {
    sign = ed25519.signer(rawSeed(seedText), pub.raw);
  } catch {
    throw new AmfError('CONFIG_INVALID', `${source}: seed and public key do not match`);
  }
  return {
    publicKey,
    seed,
    publicKeyObject: pub.keyObject(),
    sign: (data) => sign(data).toString('base64url'),
  };
}

/** A key that lives only as long as this process (tests, embedded workers without a state dir). */
export function createEphemeralAgentKey(): AgentKey {
  const pair = nkeys.createUser();
  return fromSeedText(new TextDecoder().decode(pair.getSeed()), 'a fresh nkey');
}

/**
 * Loads the agent's key from `file`, creating it (mode 0600, directory 0700) on first start. A key
 * file readable by others is narrowed to 0600 before use: it is the agent's whole identity.
 */
export async function loadOrCreateAgentKey(file: string): Promise<AgentKey> {
  let text: string | undefined;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (text !== undefined) {
    const { mode } = await stat(file);
    if ((mode & 0o077) !== 0) await chmod(file, 0o600);
    return fromSeedText(text, file);
  }
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const seedText = new TextDecoder().decode(nkeys.createUser().getSeed());
  try {
    await writeFile(file, `${seedText}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    // Another process of the same agent created it first: its key is the agent's key.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return loadOrCreateAgentKey(file);
    throw err;
  }
  await chmod(file, 0o600);
  return fromSeedText(seedText, file);
}
