/**
 * A minimal reader for the gzip-compressed tar files `opa build` writes (ustar headers, plus PAX
 * `path` records and GNU long names should a path ever exceed 100 bytes). Regular files only.
 */
import { gunzipSync } from 'node:zlib';
import { AmfError } from '../errors.js';

const BLOCK = 512;

function field(header: Buffer, start: number, length: number): string {
  const raw = header.subarray(start, start + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end === -1 ? raw.length : end).toString('utf8');
}

function octal(header: Buffer, start: number, length: number): number {
  const text = field(header, start, length).trim();
  if (!/^[0-7]*$/.test(text)) throw new AmfError('INVALID_REQUEST', `tar: bad octal field "${text}"`);
  return text === '' ? 0 : parseInt(text, 8);
}

/** PAX extended header records: `<length> <key>=<value>\n`. */
function paxPath(body: Buffer): string | undefined {
  let path: string | undefined;
  for (const line of body.toString('utf8').split('\n')) {
    const match = /^\d+ path=(.*)$/.exec(line);
    if (match) path = match[1];
  }
  return path;
}

/** Normalises an entry name: no leading `./` or `/`. */
function normalise(name: string): string {
  return name.replace(/^(\.\/|\/)+/, '');
}

/**
 * Reads a `.tar.gz` (or plain `.tar`) buffer into a map from entry path (without leading `/`) to
 * content. Throws on a truncated or corrupt archive.
 */
export function readTarGz(archive: Buffer): Map<string, Buffer> {
  const tar = archive[0] === 0x1f && archive[1] === 0x8b ? gunzipSync(archive) : archive;
  const files = new Map<string, Buffer>();
  let offset = 0;
  let longName: string | undefined;
  while (offset + BLOCK <= tar.length) {
    const header = tar.subarray(offset, offset + BLOCK);
    if (header.every((b) => b === 0)) break; // end-of-archive marker
    const size = octal(header, 124, 12);
    const type = String.fromCharCode(header[156] ?? 0);
    const bodyStart = offset + BLOCK;
    if (bodyStart + size > tar.length) throw new AmfError('INVALID_REQUEST', 'tar: archive is truncated');
    const body = tar.subarray(bodyStart, bodyStart + size);
    offset = bodyStart + Math.ceil(size / BLOCK) * BLOCK;
    if (type === 'x') {
      longName = paxPath(body) ?? longName;
      continue;
    }
    if (type === 'L') {
      longName = field(body, 0, body.length);
      continue;
    }
    const prefix = field(header, 345, 155);
    const name = longName ?? (prefix ? `${prefix}/${field(header, 0, 100)}` : field(header, 0, 100));
    longName = undefined;
    if (type === '0' || type === '\0') files.set(normalise(name), Buffer.from(body));
  }
  return files;
}
