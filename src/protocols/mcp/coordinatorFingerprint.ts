/**
 * The fingerprint the coordinator sends as `X-AMF-Coordinator-Fingerprint` on every call it forwards
 * to an agent, so the agent can recognise (and pin, SSH-style) the coordinator that calls it. The
 * coordinator serves plain HTTP and has no TLS certificate, so the fingerprint is that of a key of
 * its own: an Ed25519 key generated once into `<data-dir>/coordinator-mcp-key.pem` (mode 0600), and
 * the fingerprint is the SHA-256 of its public key (SubjectPublicKeyInfo DER), written like a
 * certificate fingerprint. Coordinators that share a data dir share the key, hence one fingerprint.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** Header carrying the coordinator's fingerprint on forwarded MCP calls. */
export const COORDINATOR_FINGERPRINT_HEADER = 'x-amf-coordinator-fingerprint';
/** File (in the data dir) holding the coordinator's key. */
export const COORDINATOR_KEY_FILE = 'coordinator-mcp-key.pem';

/** Colon-separated upper-case hex of SHA-256 over `der` (the format of `openssl x509 -fingerprint -sha256`). */
export function sha256Fingerprint(der: Buffer): string {
  const hex = createHash('sha256').update(der).digest('hex').toUpperCase();
  return hex.match(/../g)!.join(':');
}

async function readOrCreateKey(file: string): Promise<string> {
  try {
    const info = await stat(file);
    // A private key readable by others is fixed rather than trusted as is.
    if ((info.mode & 0o077) !== 0) await chmod(file, 0o600);
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    // 'wx': two coordinators starting on one data dir must not overwrite each other's key.
    await writeFile(file, pem, { mode: 0o600, flag: 'wx' });
    return pem;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return readFile(file, 'utf8');
    throw err;
  }
}

/** Loads (creating it on first use) the coordinator key in `dataDir` and returns its fingerprint. */
export async function loadCoordinatorFingerprint(dataDir: string): Promise<string> {
  const pem = await readOrCreateKey(path.join(dataDir, COORDINATOR_KEY_FILE));
  const spki = createPublicKey(createPrivateKey(pem)).export({ type: 'spki', format: 'der' });
  return sha256Fingerprint(spki);
}

const FINGERPRINT_FORMAT = /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/;

/**
 * The agent side (seed: "Agent records coordinator's fingerprint on first contact"): remembers the
 * first well-formed `X-AMF-Coordinator-Fingerprint` it is sent and reports a different one later,
 * SSH-style. It only reports: the header is an identifier, not a proof, and two coordinators that
 * do not share a data dir legitimately differ; refusing calls is the SPIFFE tier's job.
 */
export class CoordinatorFingerprintRecord {
  private firstSeen: { fingerprint: string; at: string } | undefined;
  private readonly reported = new Set<string>();

  constructor(private readonly onChange?: (first: string, seen: string) => void) {}

  /** The first fingerprint seen and when, if any. */
  get first(): { fingerprint: string; at: string } | undefined {
    return this.firstSeen;
  }

  /** Notes the header of one request; a different fingerprint is reported once per value. */
  observe(header: string | string[] | undefined): void {
    const value = Array.isArray(header) ? header[0] : header;
    if (value === undefined || !FINGERPRINT_FORMAT.test(value)) return;
    if (!this.firstSeen) {
      this.firstSeen = { fingerprint: value, at: new Date().toISOString() };
      return;
    }
    if (value === this.firstSeen.fingerprint || this.reported.has(value)) return;
    // Bounded: a caller cycling through made-up values cannot grow this without limit.
    if (this.reported.size < 100) this.reported.add(value);
    this.onChange?.(this.firstSeen.fingerprint, value);
  }
}
