/**
 * The key behind NATS auth callout (docs/security.md, "Per-agent users on an external NATS or the
 * cluster"): an nkey **account** key pair whose public half each nats-server node names as
 * `auth_callout.issuer`, and whose seed signs every authorization response and user JWT the
 * coordinators issue. It lives in `<data-dir>/callout.nkey` (0600, created once), or where
 * `AMF_CALLOUT_KEY_FILE` says; every coordinator of a mesh holds the same file.
 */
import { createPrivateKey, sign as edSign } from 'node:crypto';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createAccount, createCurve, fromSeed, type KeyPair } from '@nats-io/jwt';
import { anyPublicKeyObject, rawSeed } from './nkeyPublic.js';
import { AmfError } from '../errors.js';

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
  /**
   * The curve (X25519) key the servers encrypt authorization requests to (`auth_callout.xkey`),
   * and with which the answers are encrypted back: passwords and the JWTs granted never cross the
   * fabric in clear, even to another subscriber of the callout subject.
   */
  readonly xkey: KeyPair;
  /** Its public half (`X…`), the servers' `auth_callout.xkey`. */
  readonly xkeyPublicKey: string;
}

const ACCOUNT_SEED = /^SA[A-Z2-7]{56}$/;
const CURVE_SEED = /^SX[A-Z2-7]{56}$/;
/** Name of the curve key's seed file, beside the issuer's. */
export const CALLOUT_XKEY_FILE = 'callout-xkey.nkey';

/** Where the issuer's seed lives for `dataDir`. */
export function calloutKeyFile(dataDir: string, env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env[CALLOUT_KEY_FILE_ENV];
  return explicit ? explicit : join(dataDir, CALLOUT_KEY_FILE);
}

/**
 * The issuer's key pair for `@nats-io/jwt`, signing with node:crypto: the pure-JS Ed25519 of
 * nkeys.js is far slower, and every login needs two signatures (bench/authCallout.js,
 * docs/performance.md). The key is the same; everything else is delegated.
 */
function fastSigner(seed: string): KeyPair {
  const pair = fromSeed(new TextEncoder().encode(seed));
  const publicKey = pair.getPublicKey();
  const x = anyPublicKeyObject(publicKey).export({ format: 'jwk' }).x;
  if (x === undefined) throw new AmfError('INTERNAL', 'an Ed25519 public key exported as JWK has no x');
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

function issuerFromSeed(seed: string, file: string, xkey: KeyPair): CalloutIssuer {
  const pair = fastSigner(seed);
  return { publicKey: pair.getPublicKey(), pair, file, xkey, xkeyPublicKey: xkey.getPublicKey() };
}

/** A seed file's text when it exists (narrowing a too-open mode to 0600), else undefined. */
async function readSeed(file: string, pattern: RegExp, what: string): Promise<string | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  if (((await stat(file)).mode & 0o077) !== 0) await chmod(file, 0o600);
  const seed = text.trim();
  if (!pattern.test(seed)) throw new AmfError('CONFIG_INVALID', `${file} does not hold ${what}`);
  return seed;
}

/** A seed file's seed, created with `create` (0600, directory 0700) on first use; race-free. */
async function loadOrCreateSeed(
  file: string,
  pattern: RegExp,
  what: string,
  create: () => Uint8Array,
): Promise<string> {
  const existing = await readSeed(file, pattern, what);
  if (existing) return existing;
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const seed = new TextDecoder().decode(create());
  try {
    await writeFile(file, `${seed}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    // Another process made it first: its key is the mesh's key.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST')
      return loadOrCreateSeed(file, pattern, what, create);
    throw err;
  }
  return seed;
}

/** The curve key beside `issuerFile`, created on first use (an older data dir gains one). */
async function loadOrCreateXkey(issuerFile: string): Promise<KeyPair> {
  const file = join(dirname(issuerFile), CALLOUT_XKEY_FILE);
  const seed = await loadOrCreateSeed(file, CURVE_SEED, 'an nkey curve seed (SX…)', () =>
    createCurve().getSeed(),
  );
  return fromSeed(new TextEncoder().encode(seed));
}

/** Reads the issuer when its file exists, else undefined. */
export async function readCalloutIssuer(file: string): Promise<CalloutIssuer | undefined> {
  const seed = await readSeed(file, ACCOUNT_SEED, 'an nkey account seed (SA…)');
  return seed ? issuerFromSeed(seed, file, await loadOrCreateXkey(file)) : undefined;
}

/** Loads the issuer, creating its seed file (and the curve key's) on first use. */
export async function loadOrCreateCalloutIssuer(file: string): Promise<CalloutIssuer> {
  const seed = await loadOrCreateSeed(file, ACCOUNT_SEED, 'an nkey account seed (SA…)', () =>
    createAccount().getSeed(),
  );
  return issuerFromSeed(seed, file, await loadOrCreateXkey(file));
}
