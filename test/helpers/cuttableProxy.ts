/**
 * A TCP proxy on 127.0.0.1 that can cut the line: what a host cut off from the network looks like to
 * the one process that connects through it, without root. While cut, every connection through it is
 * closed and new ones are closed as soon as they are accepted (the client keeps redialling); healed,
 * it forwards again.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface CuttableProxy {
  /** The port clients dial instead of the target's. */
  port: number;
  /** Closes every connection through the proxy and refuses new ones until {@link heal}. */
  cut(): void;
  heal(): void;
  readonly isCut: boolean;
  close(): Promise<void>;
}

export async function startCuttableProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<CuttableProxy> {
  const open = new Set<Socket>();
  let isCut = false;
  const server: Server = createServer((client) => {
    if (isCut) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, targetHost);
    open.add(client);
    open.add(upstream);
    const drop = (): void => {
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
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('proxy has no TCP address');
  return {
    port: address.port,
    cut() {
      isCut = true;
      for (const s of [...open]) s.destroy();
      open.clear();
    },
    heal() {
      isCut = false;
    },
    get isCut() {
      return isCut;
    },
    close: () =>
      new Promise<void>((resolve) => {
        isCut = true;
        for (const s of [...open]) s.destroy();
        server.close(() => resolve());
      }),
  };
}
