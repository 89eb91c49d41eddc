/**
 * A free TCP port on 127.0.0.1 for a process that binds it later, or binds it again after a restart.
 *
 * Asking the kernel for port 0 and closing it hands back a port from the ephemeral range: the same
 * range every outgoing connection and every other `listen(0)` draws from. While the process that
 * should own the port is down (started later, or killed and restarted by a fault drill), a parallel
 * test's client connection can take it, and the restart fails with EADDRINUSE. So the port is
 * chosen below the ephemeral range, where the kernel never hands out ports by itself, and checked
 * free by binding it once.
 */
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';

const LOWEST = 10_000;
const ATTEMPTS = 200;

/** The first port of the kernel's ephemeral range (Linux default 32768). */
async function ephemeralStart() {
  try {
    const text = await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8');
    const low = Number(text.trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > LOWEST + 1000 ? low : undefined;
  } catch {
    return undefined; // not Linux, or /proc hidden
  }
}

function bindable(port) {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

function anyPort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** @returns {Promise<number>} */
export async function freePort() {
  const top = await ephemeralStart();
  if (top === undefined) return anyPort();
  for (let i = 0; i < ATTEMPTS; i += 1) {
    const port = LOWEST + Math.floor(Math.random() * (top - LOWEST));
    if (await bindable(port)) return port;
  }
  return anyPort();
}
