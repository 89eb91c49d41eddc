/**
 * The coordinator's own signing key: an nkey pair like an agent's, kept in the data dir (seed 0600 in
 * `coordinator.nk`, public half in `coordinator.pub`). It signs what agents must be able to check
 * came from the coordinator: the short-lived bearers it shows at worker edges and the invites that
 * `amf invite` prints. Agents learn the public half at join: from the data dir on the same machine,
 * from the invite on another, or handed over in-process.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadOrCreateAgentKey, type AgentKey } from './agentKey.js';
import { isNkeyUser } from './nkeyPublic.js';

const SEED_FILE = 'coordinator.nk';
const PUBLIC_FILE = 'coordinator.pub';

/** Loads the coordinator's key from `dataDir`, creating it on first start, and writes its public half beside it. */
export async function loadOrCreateCoordinatorKey(dataDir: string): Promise<AgentKey> {
  const key = await loadOrCreateAgentKey(join(dataDir, SEED_FILE));
  const publicFile = join(dataDir, PUBLIC_FILE);
  const written = await readFile(publicFile, 'utf8').catch(() => undefined);
  if (written?.trim() !== key.publicKey) await writeFile(publicFile, `${key.publicKey}\n`, { mode: 0o644 });
  return key;
}

/** The coordinator's public key as its data dir holds it, or undefined when it has none (yet). */
export async function readCoordinatorPublicKey(dataDir: string): Promise<string | undefined> {
  const text = await readFile(join(dataDir, PUBLIC_FILE), 'utf8').catch(() => undefined);
  const key = text?.trim();
  return key !== undefined && isNkeyUser(key) ? key : undefined;
}
