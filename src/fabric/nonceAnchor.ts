/**
 * The "nonce anchor" of a nats-server config under auth callout (natsServer/config.ts;
 * docs/security.md): a static nkey user no one can log in as, there only so that the server
 * challenges clients.
 */
import { createHash } from 'node:crypto';

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
