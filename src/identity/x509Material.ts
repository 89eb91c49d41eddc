/**
 * X.509-SVIDs and X.509 bundles as the Workload API sends them (concatenated ASN.1 DER), turned into
 * Node's X509Certificate and KeyObject, with the checks the X509-SVID standard asks of a leaf: its
 * URI SAN is the SPIFFE ID it was issued for.
 */
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { AmfError } from '../errors.js';

/** One X.509-SVID of this workload. */
export interface X509Svid {
  spiffeId: string;
  /** Leaf first. */
  certificates: X509Certificate[];
  privateKey: KeyObject;
  /** PEM chain and key, for TLS options. */
  certPem: string;
  keyPem: string;
  expiresAt: Date;
}

/** Splits concatenated DER certificates (each one an ASN.1 SEQUENCE with a definite length). */
export function splitDer(der: Uint8Array): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  while (at < der.length) {
    if (der[at] !== 0x30 || at + 2 > der.length)
      throw new AmfError('UNAVAILABLE', 'malformed DER certificate list');
    let len = der[at + 1]!;
    let header = 2;
    if (len & 0x80) {
      const bytes = len & 0x7f;
      if (bytes === 0 || bytes > 4 || at + 2 + bytes > der.length)
        throw new AmfError('UNAVAILABLE', 'malformed DER certificate length');
      len = 0;
      for (let i = 0; i < bytes; i++) len = len * 256 + der[at + 2 + i]!;
      header += bytes;
    }
    const end = at + header + len;
    if (end > der.length) throw new AmfError('UNAVAILABLE', 'truncated DER certificate');
    out.push(Buffer.from(der.subarray(at, end)));
    at = end;
  }
  return out;
}

/** Parses concatenated DER certificates. */
export function parseCertificates(der: Uint8Array): X509Certificate[] {
  return splitDer(der).map((c) => new X509Certificate(c));
}

/** Builds an X509Svid and checks that the leaf names `spiffeId` in its URI SAN. */
export function parseX509Svid(spiffeId: string, chainDer: Uint8Array, keyDer: Uint8Array): X509Svid {
  const certificates = parseCertificates(chainDer);
  const leaf = certificates[0];
  if (!leaf) throw new AmfError('UNAVAILABLE', `the X.509-SVID of ${spiffeId} has no certificate`);
  const uris = (leaf.subjectAltName ?? '')
    .split(', ')
    .filter((s) => s.startsWith('URI:'))
    .map((s) => s.slice(4));
  if (uris.length !== 1 || uris[0] !== spiffeId)
    throw new AmfError('UNAVAILABLE', `the X.509-SVID leaf does not name ${spiffeId} as its only URI SAN`);
  const privateKey = createPrivateKey({ key: Buffer.from(keyDer), format: 'der', type: 'pkcs8' });
  return {
    spiffeId,
    certificates,
    privateKey,
    certPem: certificates.map((c) => c.toString()).join(''),
    keyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    expiresAt: new Date(leaf.validTo),
  };
}
