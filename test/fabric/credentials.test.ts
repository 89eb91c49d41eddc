import { chmod, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CREDENTIALS_FILE,
  loadOrCreateCredentials,
  readCredentials,
  ROLE_USERS,
  type NatsCredentials,
} from '../../src/fabric/credentials.js';

let root: string;
let counter = 0;
const freshDir = (): string => join(root, `d${++counter}`, 'data');
const modeOf = async (p: string): Promise<number> => (await stat(p)).mode & 0o777;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'amf-cred-test-'));
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('loadOrCreateCredentials', () => {
  it('generates a 0600 file in a 0700 data dir, whatever the umask', async () => {
    const dir = freshDir();
    const previous = process.umask(0o000);
    let creds: NatsCredentials;
    try {
      creds = await loadOrCreateCredentials(dir, {});
    } finally {
      process.umask(previous);
    }
    expect(await modeOf(join(dir, CREDENTIALS_FILE))).toBe(0o600);
    expect(await modeOf(dir)).toBe(0o700);
    for (const role of ['coordinator', 'specialist', 'watcher', 'connector'] as const) {
      expect(creds[role].user).toBe(ROLE_USERS[role]);
      // 32 random bytes in base64url, no padding
      expect(creds[role].password).toMatch(/^[A-Za-z0-9_-]{43}$/);
    }
    expect(new Set(Object.values(creds).map((c) => c.password)).size).toBe(4);
  });

  it('gives the same passwords on reload, and readCredentials sees them', async () => {
    const dir = freshDir();
    const first = await loadOrCreateCredentials(dir, {});
    expect(await loadOrCreateCredentials(dir, {})).toEqual(first);
    expect(await readCredentials(dir)).toEqual(first);
  });

  it('agrees on one set of passwords when several processes start at once', async () => {
    const dir = freshDir();
    const all = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateCredentials(dir, {})));
    for (const c of all) expect(c).toEqual(all[0]);
    expect(await readCredentials(dir)).toEqual(all[0]);
  });

  it('lets AMF_*_PASS win, when generating and over an existing file, and records it', async () => {
    const dir = freshDir();
    const created = await loadOrCreateCredentials(dir, { AMF_COORD_PASS: 'coord-from-env_1' });
    expect(created.coordinator.password).toBe('coord-from-env_1');
    expect((await readCredentials(dir)).coordinator.password).toBe('coord-from-env_1');

    const overridden = await loadOrCreateCredentials(dir, {
      AMF_SPECIALIST_PASS: 'spec-env',
      AMF_WATCHER_PASS: '',
    });
    expect(overridden.specialist.password).toBe('spec-env');
    expect(overridden.watcher.password).toBe(created.watcher.password);
    expect(overridden.coordinator.password).toBe('coord-from-env_1');
    expect(await readCredentials(dir)).toEqual(overridden);
    expect(await modeOf(join(dir, CREDENTIALS_FILE))).toBe(0o600);
  });

  it('refuses an env password nats-server could not use, naming the variable', async () => {
    await expect(loadOrCreateCredentials(freshDir(), { AMF_CONNECTOR_PASS: 'a\nb' })).rejects.toThrow(
      /AMF_CONNECTOR_PASS must not contain control characters/,
    );
    await expect(loadOrCreateCredentials(freshDir(), { AMF_WATCHER_PASS: '$2a$10$abc' })).rejects.toThrow(
      /AMF_WATCHER_PASS must not start with "\$2"/,
    );
  });

  it('narrows an existing file that is readable by others to 0600', async () => {
    const dir = freshDir();
    await loadOrCreateCredentials(dir, {});
    const file = join(dir, CREDENTIALS_FILE);
    await chmod(file, 0o644);
    await loadOrCreateCredentials(dir, {});
    expect(await modeOf(file)).toBe(0o600);
  });

  it('names the file and the problem when the file is malformed', async () => {
    const dir = freshDir();
    await loadOrCreateCredentials(dir, {});
    const file = join(dir, CREDENTIALS_FILE);

    await writeFile(file, '{ not json', { mode: 0o600 });
    await expect(loadOrCreateCredentials(dir, {})).rejects.toThrow(
      `malformed NATS credentials file ${file}: not valid JSON`,
    );

    await writeFile(file, JSON.stringify([1, 2]));
    await expect(readCredentials(dir)).rejects.toThrow(
      /expected a JSON object with keys coordinator, specialist/,
    );

    const good = await loadOrCreateCredentials(freshDir(), {});
    await writeFile(file, JSON.stringify({ ...good, specialist: { user: 'amf-specialist', password: 42 } }));
    await expect(loadOrCreateCredentials(dir, {})).rejects.toThrow(
      `malformed NATS credentials file ${file}: "specialist.password" must be a non-empty string`,
    );

    await writeFile(file, JSON.stringify({ ...good, watcher: { user: 'root', password: 'x' } }));
    await expect(loadOrCreateCredentials(dir, {})).rejects.toThrow(
      /"watcher.user" must be "amf-watcher", got "root"/,
    );

    const missing: Partial<NatsCredentials> = { ...good };
    delete missing.connector;
    await writeFile(file, JSON.stringify(missing));
    await expect(loadOrCreateCredentials(dir, {})).rejects.toThrow(/"connector" must be an object/);
  });
});

describe('readCredentials', () => {
  it('never creates credentials and says where it looked', async () => {
    const dir = freshDir();
    await expect(readCredentials(dir)).rejects.toThrow(
      `NATS credentials file ${join(dir, CREDENTIALS_FILE)} does not exist`,
    );
  });
});
