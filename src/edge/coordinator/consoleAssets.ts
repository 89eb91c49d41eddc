/**
 * The console's static files: `GET /` is src/web/index.html and `GET /console/<file>` one of the
 * hand-written ES modules and the stylesheet in src/web/console/. Nothing is built at run time; the
 * files ship in the package (`files` includes src/web). Only names in the folder's listing are served
 * (no path is ever joined from the request), each read once and kept in memory.
 */
import { readFile, readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import { AmfError } from '../../errors.js';
import type { Router } from '../../http/httpKit.js';

/** Where src/web is, from dist/edge/coordinator (installed package) or src/edge/coordinator (tests). */
const WEB_DIRS = [
  fileURLToPath(new URL('../../../src/web', import.meta.url)),
  fileURLToPath(new URL('../../web', import.meta.url)),
];
export const CONSOLE_PREFIX = '/console/';
const ASSET_NAME = /^[a-z][a-z0-9-]{0,40}\.(js|css|svg)$/;
const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
};
/** The page may load only its own files and talk only to its own origin. */
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

async function findWebDir(): Promise<string> {
  for (const dir of WEB_DIRS) {
    try {
      await readFile(join(dir, 'index.html'));
      return dir;
    } catch {
      // try the next location
    }
  }
  throw new AmfError('INTERNAL', `console files not found (looked in ${WEB_DIRS.join(', ')})`);
}

function send(res: ServerResponse, type: string, body: Buffer): void {
  res.writeHead(200, {
    'content-type': type,
    'content-security-policy': CSP,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-cache',
  });
  res.end(body);
}

/** Registers `GET /` and `GET /console/<file>`. */
export function registerConsoleAssets(router: Router): void {
  let loaded: Promise<{ page: Buffer; assets: Map<string, Buffer> }> | undefined;
  const load = async () => {
    const dir = await findWebDir();
    const page = await readFile(join(dir, 'index.html'));
    const assets = new Map<string, Buffer>();
    for (const name of await readdir(join(dir, 'console'))) {
      if (ASSET_NAME.test(name)) assets.set(name, await readFile(join(dir, 'console', name)));
    }
    return { page, assets };
  };
  const files = () => {
    loaded ??= load().catch((err: unknown) => {
      loaded = undefined;
      throw err;
    });
    return loaded;
  };
  router.on('GET', '/', async (_req, res) => send(res, 'text/html; charset=utf-8', (await files()).page));
  router.onPrefix('GET', CONSOLE_PREFIX, async (_req, res, url) => {
    const name = url.pathname.slice(CONSOLE_PREFIX.length);
    const body = ASSET_NAME.test(name) ? (await files()).assets.get(name) : undefined;
    if (!body) throw new AmfError('NOT_FOUND', `no console file ${name.slice(0, 64)}`);
    send(res, TYPES[name.slice(name.lastIndexOf('.') + 1)]!, body);
  });
}
