/**
 * The joiner's side of an invite (coordinator/invites.ts): an agent on another machine presents the
 * token `amf invite` printed, with a signature proving it holds its own key, and is enrolled. What the
 * coordinator answers (its URL, the NATS URL, its public key) is kept beside the agent's key as its
 * membership, so a restart joins again without the invite, and the agent trusts that coordinator key
 * from then on.
 */
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { createSocket } from 'node:dgram';
import { dirname } from 'node:path';
import { AmfError } from '../errors.js';
import { readJsonAnswer } from '../net/jsonAnswer.js';
import type { AgentKey } from '../identity/agentKey.js';
import { isNkeyUser } from '../identity/nkeyPublic.js';
import { isLoopbackHost } from '../net/hostRules.js';
import { joinProofText, readInvite } from '../identity/inviteToken.js';

/** What an enrolled agent remembers of its mesh. */
export interface Membership {
  coordinatorUrl: string;
  natsUrl: string;
  /** The coordinator's public key: what the agent checks the coordinator's bearers and orders against. */
  coordinatorKey: string;
}

export interface InviteJoinOptions {
  token: string;
  key: AgentKey;
  name: string;
  tags: string[];
  /** Overrides the coordinator URL the invite names (e.g. another address of the same machine). */
  coordinatorUrl?: string;
}

/** Redeems the invite at its coordinator; resolves with the membership it grants. */
export async function joinWithInvite(opts: InviteJoinOptions): Promise<Membership> {
  const claims = await readInvite(opts.token);
  const coordinatorUrl = opts.coordinatorUrl ?? claims.coordinatorUrl;
  const url = new URL('/join', coordinatorUrl);
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        invite: opts.token.trim(),
        nkey: opts.key.publicKey,
        name: opts.name,
        tags: opts.tags,
        proof: opts.key.sign(new TextEncoder().encode(joinProofText(claims.id, opts.key.publicKey))),
      }),
      signal: AbortSignal.timeout(15_000),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new AmfError(
      'UNAVAILABLE',
      `cannot reach the coordinator at ${url.origin} to redeem the invite (${cause?.code ?? cause?.message ?? (err as Error).message}): ` +
        'is it started with --host on an address this machine can reach?',
    );
  }
  const { body, error } = await readJsonAnswer(res, 300);
  if (error !== undefined)
    throw new AmfError('UNAUTHORIZED', `the coordinator at ${url.origin} refused the invite: ${error}`);
  const membership: Membership = {
    coordinatorUrl,
    natsUrl: typeof body.nats_url === 'string' ? body.nats_url : claims.natsUrl,
    coordinatorKey: claims.coordinatorKey,
  };
  // The coordinator must be the one that signed the invite: its answer cannot swap the key.
  if (body.coordinator_key !== claims.coordinatorKey)
    throw new AmfError(
      'UNAUTHORIZED',
      `the coordinator at ${url.origin} is not the one that issued this invite`,
    );
  return membership;
}

/** Reads the membership kept in `file`, or undefined when the agent has none (never joined by invite). */
export async function readMembership(file: string): Promise<Membership | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const value = JSON.parse(text) as Record<string, unknown>;
  const { coordinator_url: coordinatorUrl, nats_url: natsUrl, coordinator_key: coordinatorKey } = value;
  if (typeof coordinatorUrl !== 'string' || typeof natsUrl !== 'string' || !isNkeyUser(coordinatorKey))
    throw new AmfError('CONFIG_INVALID', `${file} is not an AMF membership file: join again with --invite`);
  return { coordinatorUrl, natsUrl, coordinatorKey: coordinatorKey as string };
}

/** Keeps `membership` in `file` (0600, directory 0700). */
export async function writeMembership(file: string, membership: Membership): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const text = JSON.stringify(
    {
      coordinator_url: membership.coordinatorUrl,
      nats_url: membership.natsUrl,
      coordinator_key: membership.coordinatorKey,
    },
    null,
    2,
  );
  await writeFile(file, `${text}\n`, { mode: 0o600 });
  await chmod(file, 0o600);
}

/**
 * The local address this machine would use towards `host` (a UDP socket's connect sends nothing):
 * what to suggest for `--host` when a worker would otherwise bind loopback only.
 */
export async function localAddressTowards(host: string): Promise<string | undefined> {
  if (isLoopbackHost(host)) return undefined;
  const bare = host.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    const socket = createSocket(bare.includes(':') ? 'udp6' : 'udp4');
    socket.once('error', () => {
      socket.close();
      resolve(undefined);
    });
    socket.connect(9, bare, () => {
      const { address } = socket.address();
      socket.close();
      resolve(address);
    });
  });
}

/**
 * Refuses to join another machine's mesh with an edge bound to loopback: the coordinator would
 * fetch its own 127.0.0.1 for the card and list the agent unverified. Names the address to use.
 */
export async function checkReachableHost(bindHost: string, coordinatorUrl: string): Promise<void> {
  const coordinatorHost = new URL(coordinatorUrl).hostname;
  if (!isLoopbackHost(bindHost) || isLoopbackHost(coordinatorHost)) return;
  const suggestion = (await localAddressTowards(coordinatorHost)) ?? '<its LAN address>';
  throw new AmfError(
    'INVALID_REQUEST',
    `this agent would listen on ${bindHost} only, which the coordinator at ${coordinatorHost} cannot reach: ` +
      `start it with --host ${suggestion}`,
  );
}
