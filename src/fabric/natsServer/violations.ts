/** The permission violations nats-server logs, read so the coordinator can warn about them. */

/** A subject a client was refused by the server's permissions (read from its log). */
export interface PermissionViolation {
  kind: 'publish' | 'subscribe';
  /** The user name, or the nkey of an nkey user. */
  user: string;
  subject: string;
}

/**
 * Reads a `Publish Violation` / `Subscription Violation` line of nats-server's log, in either form:
 * `Publish Violation - User "<name>", Subject "<subject>"` (nats-server 2.9: `User` or `Nkey`), or
 * `"<account>/user:<name>" - Publish Violation - Subject "<subject>"` (2.10+: `user:` or `nkey:`),
 * where a user the auth callout issued is named as the callout named it (the agent id).
 */
export function parseViolation(line: string): PermissionViolation | undefined {
  const kind = (word: string | undefined): PermissionViolation['kind'] =>
    word === 'Publish' ? 'publish' : 'subscribe';
  const classic =
    /(Publish|Subscription) Violation - (?:User|Nkey) "([^"]{1,256})", Subject "([^"]{1,512})"/.exec(line);
  if (classic) return { kind: kind(classic[1]), user: classic[2]!, subject: classic[3]! };
  const issued =
    /"[^"/]{1,128}\/(?:user|nkey):([^"]{1,256})" - (Publish|Subscription) Violation - Subject "([^"]{1,512})"/.exec(
      line,
    );
  if (issued) return { kind: kind(issued[2]), user: issued[1]!, subject: issued[3]! };
  return undefined;
}
