/**
 * The ports that a fault drill restarts a process on (and that test clusters restart nodes on) come
 * from below the kernel's ephemeral range, so no outgoing connection or `listen(0)` of a parallel
 * test can take one while its owner is down.
 */
import { readFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/lib/freePort.mjs';

const ephemeralStart = Number(
  readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0],
);

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const srv = createServer((socket) => socket.destroy());
    srv.once('error', reject);
    srv.listen(port, '127.0.0.1', () => resolve(srv));
  });
}

describe('freePort', () => {
  it('returns distinct bindable ports below the ephemeral range', async () => {
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(10_000);
      expect(port).toBeLessThan(ephemeralStart);
    }
    // Random picks from ~22,000 ports: 20 of them collide only by a rare chance, never all.
    expect(new Set(ports).size).toBeGreaterThan(15);
    const servers = await Promise.all(ports.slice(0, 5).map((p) => listen(p)));
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  });

  it('skips a port that is taken', async () => {
    // Hold the ports it hands out; later calls must step around them.
    const held: Server[] = [];
    for (let i = 0; i < 30; i += 1) held.push(await listen(await freePort()));
    const taken = new Set(held.map((s) => (s.address() as { port: number }).port));
    const next = await freePort();
    expect(taken.has(next)).toBe(false);
    // And an outgoing connection's local port is never one of them (all are below the range).
    const target = held[0]!;
    const local = await new Promise<number>((resolve, reject) => {
      const sock = connect((target.address() as { port: number }).port, '127.0.0.1', () => {
        resolve(sock.localPort!);
        sock.destroy();
      });
      sock.once('error', reject);
    });
    expect(local).toBeGreaterThanOrEqual(ephemeralStart);
    await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
  });
});
