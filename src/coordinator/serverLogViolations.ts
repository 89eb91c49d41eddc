/**
 * Permission refusals of an external nats-server, read from its log files (`nats.server_logs`), so
 * that a coordinator on such a server warns about them as it does for the server it spawns
 * (agentGrants.ts, `permissionViolationReporter`). nats-server publishes no event for a refused
 * publish or subscribe: its log is the only witness, so this works only where the coordinator can
 * read that log (the nodes of scripts/cluster.sh on the same machine).
 */
import { followLog, type LogFollower } from '../fabric/logFollower.js';
import { parseViolation, type PermissionViolation } from '../fabric/natsServer/violations.js';
import type { LogFn } from '../log.js';

/** Follows every file until `until` settles (the coordinator's connection closing). */
export async function followServerLogs(
  paths: readonly string[],
  onViolation: (violation: PermissionViolation) => void,
  log: LogFn,
  until: Promise<unknown>,
): Promise<void> {
  if (paths.length === 0) return;
  const followers: LogFollower[] = await Promise.all(
    paths.map((path) =>
      followLog({
        path,
        onLine: (line) => {
          const violation = parseViolation(line);
          if (violation) onViolation(violation);
        },
        onProblem: (message) => log('warn', 'cannot follow a nats-server log', { path, problem: message }),
      }),
    ),
  );
  log('info', 'following nats-server logs for permission refusals', { paths });
  void until.finally(() => {
    for (const f of followers) f.close();
  });
}
