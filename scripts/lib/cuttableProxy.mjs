/**
 * A TCP proxy on 127.0.0.1 that can cut the line: what a host cut off from the network looks like to
 * the one process that connects through it, without root (the fault drill's partition fault and
 * test/cluster/partitionHeal.test.ts). While cut, every connection through it is closed and new ones
 * are closed as soon as they are accepted (the client keeps redialling); healed, it forwards again.
 */
import { connect, createServer } from 'node:net';

/** Starts the proxy in front of `targetHost:targetPort`; resolves once it listens. */
export async function startCuttableProxy(targetPort, targetHost = '127.0.0.1') {
  const open = new Set();
  let isCut = false;
  const closeAll = () => {
    for (const s of [...open]) s.destroy();
    open.clear();
  };
  const server = createServer((client) => {
    if (isCut) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, targetHost);
    open.add(client);
    open.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    port: server.address().port,
    cut() {
      isCut = true;
      closeAll();
    },
    heal() {
      isCut = false;
    },
    get isCut() {
      return isCut;
    },
    close: () =>
      new Promise((resolve) => {
        isCut = true;
        closeAll();
        server.close(() => resolve());
      }),
  };
}
