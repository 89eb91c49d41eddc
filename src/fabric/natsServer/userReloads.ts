/**
 * User reloads of a running nats-server: the config is rewritten with the new users and the server
 * is sent SIGHUP; a reload is done once the server logs that it reloaded.
 */
import { writePrivateFile } from '../credentials.js';
import type { MeshUsers } from '../agentUsers.js';
import type { SpawnedServer } from './process.js';
import { AmfError } from '../../errors.js';

/**
 * The `reloadUsers` of a server handle. `reloads` is the set of waiters the server's log lines are
 * handed to; `render` writes the config for a user set.
 */
export function userReloader(
  server: Pick<SpawnedServer, 'pid' | 'exitInfo'>,
  configPath: string,
  render: (users: MeshUsers) => string,
  reloads: Set<(line: string) => void>,
): (users: MeshUsers) => Promise<void> {
  // Reloads run one after another, and changes that arrive while one runs fold into the next: each
  // writes the whole user set, so only the newest set matters. A burst of admissions and revocations
  // (a test suite, a mesh starting) then costs two reloads instead of one each, and a server busy
  // reloading does not keep new connections waiting behind a queue of them.
  let reloading: Promise<void> = Promise.resolve();
  let queued: { users: MeshUsers; done: Promise<void> } | undefined;
  const reloadOnce = async (users: MeshUsers): Promise<void> => {
    if (server.exitInfo() !== undefined) return;
    await writePrivateFile(configPath, render(users));
    const done = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => finish(new AmfError('TIMEOUT', 'nats-server did not confirm the reload in 5 s')),
        5_000,
      );
      const waiter = (line: string): void => {
        if (/Reloaded server configuration/.test(line)) finish();
        else if (/config reload failed|Failed to reload/i.test(line)) finish(new AmfError('INTERNAL', line));
      };
      const finish = (err?: Error): void => {
        clearTimeout(timer);
        reloads.delete(waiter);
        if (err) reject(err);
        else resolve();
      };
      reloads.add(waiter);
    });
    process.kill(server.pid, 'SIGHUP');
    await done;
  };
  return (users: MeshUsers): Promise<void> => {
    if (queued) {
      queued.users = users;
      return queued.done;
    }
    const entry: { users: MeshUsers; done: Promise<void> } = { users, done: Promise.resolve() };
    entry.done = reloading.then(() => {
      queued = undefined;
      return reloadOnce(entry.users);
    });
    queued = entry;
    reloading = entry.done.catch(() => undefined);
    return entry.done;
  };
}
