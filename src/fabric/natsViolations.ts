/** The permission violations nats-server logs, read so the coordinator can warn about them. */

/** A subject a client was refused by the server's permissions (read from its log). */
export interface PermissionViolation {
  kind: 'publish' | 'subscribe';
  /** The user name, or the nkey of an nkey user. */
  user: string;
  subject: string;
}

/** Reads a `Publish Violation` / `Subscription Violation` line of nats-server's log. */
export function parseViolation(line: string): PermissionViolation | undefined {
  const m = /(Publish|Subscription) Violation - (?:User|Nkey) "([^"]{1,128})", Subject "([^"]{1,512})"/.exec(
    line,
  );
  if (!m) return undefined;
  return { kind: m[1] === 'Publish' ? 'publish' : 'subscribe', user: m[2]!, subject: m[3]! };
}
