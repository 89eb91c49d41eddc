/**
 * Starting and stopping an HTTP(S) server, the same way for every edge of AMF (coordinator,
 * worker, AFM agent, A2A bridge): listen resolves to the URL clients should use, close does not
 * hang on idle keep-alive connections.
 */
import type { Server } from 'node:http';
import { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

/**
 * Listens on host:port (0 = any free port) and returns the bound base URL, e.g.
 * `http://127.0.0.1:41234` or `https://[::1]:8443`. Rejects with the listen error (EADDRINUSE...).
 */
export async function listen(server: Server, host: string, port: number): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const h = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `${server instanceof HttpsServer ? 'https' : 'http'}://${h}:${addr.port}`;
}

/**
 * The first step of a graceful stop: no new connection is accepted and idle keep-alive connections
 * are closed at once. A request that still arrives on a busy kept-alive connection is the caller's
 * to refuse (with `Connection: close`); {@link closeServer} ends the rest.
 */
export function stopAccepting(server: Server): void {
  if (server.listening) server.close();
  server.closeIdleConnections();
}

/**
 * Closes a server. Idle keep-alive connections are ended at once (else close() waits for the
 * clients' keep-alive timeout); busy ones get 2 s to finish their response before being cut.
 */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    // Stopped accepting already (stopAccepting): close() would fail; wait for the connections.
    if (server.listening) server.close(() => resolve());
    else
      server.getConnections((_err, open) => (open > 0 ? server.once('close', () => resolve()) : resolve()));
    server.closeIdleConnections();
    setTimeout(() => server.closeAllConnections(), 2000).unref();
  });
}
