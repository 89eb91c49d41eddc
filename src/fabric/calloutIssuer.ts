/**
 * The key behind NATS auth callout (docs/security.md, "Per-agent users on an external NATS or the
 * cluster"): an nkey **account** key pair whose public half each nats-server node names as
 * `auth_callout.issuer`, and whose seed signs every authorization response and user JWT the
 * coordinators issue. It lives in `<data-dir>/callout.nkey` (0600, created once), or where
 * `AMF_CALLOUT_KEY_FILE` says; every coordinator of a mesh holds the same file.
 */
import { createHash, createPrivateKey, sign as edSign } from 'node:crypto';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createAccount, fromSeed, type KeyPair } from '@nats-io/jwt';
import { anyPublicKeyObject, rawSeed } from '../identity/nkeyPublic.js';

/** Name of the issuer's seed file inside the data dir. */
export const CALLOUT_KEY_FILE = 'callout.nkey';
/** Environment variable naming another file for the issuer's seed. */
export const CALLOUT_KEY_FILE_ENV = 'AMF_CALLOUT_KEY_FILE';

/** The loaded issuer: its public key (`A…`, the servers' `issuer`) and the pair that signs. */
export interface CalloutIssuer {
  readonly publicKey: string;
  readonly pair: KeyPair;
  /** Where the seed was read from (for messages; never its content). */
  readonly file: string;
}

const ACCOUNT_SEED = /^SA[A-Z2-7]{56}$/;

/** Where the issuer's seed lives for `dataDir`. */
export function calloutKeyFile(dataDir: string, env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env[CALLOUT_KEY_FILE_ENV];
  return explicit ? explicit : join(dataDir, CALLOUT_KEY_FILE);
}

/**
 * The issuer's key pair for `@nats-io/jwt`, signing with node:crypto: the pure-JS Ed25519 of
 * nkeys.js took about 95 ms per signature on a loaded 2-core machine, and every login needs two
 * (bench/authCallout.js). The key is the same; everything else is delegated.
 */
function fastSigner(seed: string): KeyPair {
  const pair = fromSeed(new TextEncoder().encode(seed));
  const publicKey = pair.getPublicKey();
  const x = anyPublicKeyObject(publicKey).export({ format: 'jwk' }).x;
  const d = Buffer.from(rawSeed(seed)).toString('base64url');
  const privateKey = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', d, x }, format: 'jwk' });
  // Derived once: the encoders ask for both on every JWT, and nkeys.js derives them anew each time.
  const privateKeyBytes = pair.getPrivateKey();
  return {
    getPublicKey: () => publicKey,
    getPrivateKey: () => privateKeyBytes,
    getSeed: () => pair.getSeed(),
    sign: (input) => new Uint8Array(edSign(null, input, privateKey)),
    verify: (input, sig) => pair.verify(input, sig),
    clear: () => pair.clear(),
    seal: (input, recipient, nonce) => pair.seal(input, recipient, nonce),
    open: (message, sender) => pair.open(message, sender),
  };
}

function fromText(text: string, file: string): CalloutIssuer {
  const seed = text.trim();
  if (!ACCOUNT_SEED.test(seed)) throw new Error(`${file} does not hold an nkey account seed (SA…)`);
  const pair = fastSigner(seed);
  return { publicKey: pair.getPublicKey(), pair, file };
}

/** Reads the issuer when its file exists (narrowing a too-open mode to 0600), else undefined. */
export async function readCalloutIssuer(file: string): Promise<CalloutIssuer | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  if (((await stat(file)).mode & 0o077) !== 0) await chmod(file, 0o600);
  return fromText(text, file);
}

/** Loads the issuer, creating its seed file (0600, directory 0700) on first use; race-free. */
export async function loadOrCreateCalloutIssuer(file: string): Promise<CalloutIssuer> {
  const existing = await readCalloutIssuer(file);
  if (existing) return existing;
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const seed = new TextDecoder().decode(createAccount().getSeed());
  try {
    await writeFile(file, `${seed}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    // Another process made it first: its key is the mesh's key.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return loadOrCreateCalloutIssuer(file);
    throw err;
  }
  return fromText(seed, file);
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function crc16(bytes: Uint8Array): number {
  // CRC-16/XMODEM, the checksum every nkey carries.
  let crc = 0;
  for (const b of bytes) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

function base32(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/**
 * The "nonce anchor": a static nkey user no one can log in as. nats-server sends a nonce to clients
 * (and so gets an nkey signature from them, which the callout checks) only when at least one nkey
 * user is configured; under auth callout there may be none, and then an nkey login would be a bare
 * claim of a public key. The key is SHA-256 of a fixed text used as an Ed25519 public key: anyone
 * can recompute it, and no one knows a seed for it.
 */
export const NONCE_ANCHOR_NKEY: string = (() => {
  const raw = createHash('sha256').update('amf nats nonce anchor v1').digest();
  const body = new Uint8Array(33);
  body[0] = 20 << 3; // the user prefix 'U'
  body.set(raw, 1);
  const crc = crc16(body);
  const full = new Uint8Array(35);
  full.set(body);
  full[33] = crc & 0xff;
  full[34] = crc >> 8;
  return base32(full);
})();
