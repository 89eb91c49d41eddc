/**
 * `amf invite [--tags a,b] [--ttl 1h]`: asks the coordinator on this machine for a one-time invite
 * (operator key from the data dir, as every client command) and prints it as the last line of
 * stdout, so a script can take it with `tail -1`. What it allows goes to stderr for the person.
 */
import type { AmfConfig } from '../config/config.js';
import { unreachableMessage } from './clientCommands.js';
import { readJsonAnswer } from '../net/jsonAnswer.js';

export async function inviteCommand(
  config: AmfConfig,
  tags: string[],
  ttl: string | undefined,
): Promise<number> {
  const url = new URL('/invites', config.coordinator.url);
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(config.coordinator.apiKey ? { authorization: `Bearer ${config.coordinator.apiKey}` } : {}),
      },
      body: JSON.stringify({ tags, ...(ttl !== undefined ? { ttl } : {}) }),
      signal: AbortSignal.timeout(10_000),
    });
  } catch (err) {
    process.stderr.write(unreachableMessage('invite', url, err));
    return 1;
  }
  const { body, error } = await readJsonAnswer(res);
  if (error !== undefined) {
    process.stderr.write(`amf invite: HTTP ${res.status}: ${error}\n`);
    return 1;
  }
  const scope =
    Array.isArray(body.tags) && body.tags.length > 0 ? (body.tags as string[]).join(', ') : 'any tag';
  process.stderr.write(
    `invite for ${scope}, valid until ${String(body.expires_at)}, usable once.\n` +
      `On the other machine:\n` +
      `  amf worker --name NAME --tags TAGS --handler HANDLER --host ITS_ADDRESS --invite <the token below>\n`,
  );
  process.stdout.write(`${String(body.invite)}\n`);
  return 0;
}
