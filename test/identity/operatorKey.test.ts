/**
 * The operator key file (identity/operatorKey.ts) and how the CLI finds the key it sends
 * (cli/operatorKeyLookup.ts): created once with mode 0600 in a 0700 dir, the same key for racing
 * starters, a too-open file narrowed; the CLI takes the configured key first, else the data dir's,
 * and never sends the data dir's key to a coordinator on another machine.
 */
import { chmod, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { isThisMachine, withOperatorKey } from '../../src/cli/operatorKeyLookup.js';
import { loadOrCreateOperatorKey, operatorKeyFile, readOperatorKey } from '../../src/identity/operatorKey.js';

const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'amf-operator-key-'));
  dirs.push(dir);
  return dir;
}
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

describe('the operator key file', () => {
  it('is created once (0600 in a 0700 dir) and read back unchanged', async () => {
    const dataDir = join(await tempDir(), 'data');
    expect(await readOperatorKey(dataDir)).toBeUndefined();
    const key = await loadOrCreateOperatorKey(dataDir);
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((await stat(operatorKeyFile(dataDir))).mode & 0o777).toBe(0o600);
    expect((await stat(dataDir)).mode & 0o777).toBe(0o700);
    expect(await loadOrCreateOperatorKey(dataDir)).toBe(key);
    expect(await readOperatorKey(dataDir)).toBe(key);
  });

  it('gives racing starters one key', async () => {
    const dataDir = await tempDir();
    const keys = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateOperatorKey(dataDir)));
    expect(new Set(keys).size).toBe(1);
  });

  it('narrows a file others can read to 0600 before using it', async () => {
    const dataDir = await tempDir();
    await writeFile(operatorKeyFile(dataDir), 'k-from-elsewhere\n');
    await chmod(operatorKeyFile(dataDir), 0o644);
    expect(await readOperatorKey(dataDir)).toBe('k-from-elsewhere');
    expect((await stat(operatorKeyFile(dataDir))).mode & 0o777).toBe(0o600);
  });
});

describe('the key the CLI sends', () => {
  async function config(dataDir: string, env: NodeJS.ProcessEnv = {}, apiKey?: string, url?: string) {
    return loadConfig({
      env: { HOME: tmpdir(), ...env },
      flags: {
        dataDir,
        coordinator: { ...(apiKey ? { apiKey } : {}), ...(url ? { url } : {}) },
      },
    });
  }

  it('is --api-key, else AMF_API_KEY, else <data-dir>/operator.key', async () => {
    const dataDir = await tempDir();
    const fileKey = await loadOrCreateOperatorKey(dataDir);
    expect((await withOperatorKey(await config(dataDir))).coordinator.apiKey).toBe(fileKey);
    const env = { AMF_API_KEY: 'from-env' };
    expect((await withOperatorKey(await config(dataDir, env))).coordinator.apiKey).toBe('from-env');
    expect((await withOperatorKey(await config(dataDir, env, 'from-flag'))).coordinator.apiKey).toBe(
      'from-flag',
    );
  });

  it('is none when the data dir holds no key', async () => {
    const dataDir = await tempDir();
    expect((await withOperatorKey(await config(dataDir))).coordinator.apiKey).toBeNull();
  });

  it('never takes the data dir key to a coordinator on another machine', async () => {
    const dataDir = await tempDir();
    await loadOrCreateOperatorKey(dataDir);
    for (const url of [
      'http://coordinator.example:8765',
      'http://203.0.113.7:8765',
      'http://localhost.evil.example',
    ])
      expect(
        (await withOperatorKey(await config(dataDir, {}, undefined, url))).coordinator.apiKey,
        url,
      ).toBeNull();
    expect(isThisMachine('http://localhost:8765')).toBe(true);
    expect(isThisMachine('http://[::1]:8765')).toBe(true);
    expect(isThisMachine('http://127.0.0.2:8765')).toBe(true);
  });
});
