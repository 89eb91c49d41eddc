/**
 * A drill case that fails in set-up ends every process it started. The case below starts a real
 * coordinator (which spawns its own nats-server, in a process group of its own) and then a worker
 * whose handler does not exist, so the worker exits before it serves and the case fails. The row
 * must carry that error, and afterwards no process may name the drill's temp dir: neither the
 * coordinator nor the nats-server it spawned (which a SIGKILL of the coordinator's group alone
 * leaves behind, with ppid 1).
 */
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runDrill, type DrillFault } from '../../scripts/faults/drill.mjs';
import { killAllGroups, processesMentioning } from '../../scripts/faults/procs.mjs';

describe('fault drill set-up failure', () => {
  // Should the test itself time out, nothing it started may stay.
  afterAll(() => killAllGroups());

  it(
    'ends the coordinator and its nats-server when a worker does not come up',
    { timeout: 120_000 },
    async () => {
      let natsSeen: number[] = [];
      const failing: DrillFault = {
        id: 99,
        name: 'worker that does not come up',
        async run(ctx) {
          try {
            await ctx.spawnedMesh({ workers: 1, handler: '/nonexistent/amf-drill-handler.mjs' });
          } finally {
            // The nats-server the coordinator spawned, seen while the case was failing.
            // (This case's dir only: another drill may be running on the machine.)
            const caseDir = dirname(ctx.run.logDir);
            natsSeen = (await processesMentioning('nats-server.conf'))
              .filter((p) => p.cmdline.includes(caseDir))
              .map((p) => p.pid);
          }
          throw new Error('the worker came up although its handler does not exist');
        },
      };
      const result = await runDrill({ quick: true, faults: [failing], mdns: false });
      const row = result.rows[0];
      expect(row?.ran).toBe(true);
      expect(row?.error).toMatch(/drill-f99-w1 exited/);
      // The case really had a spawned nats-server to clean up.
      expect(natsSeen.length).toBeGreaterThan(0);
      expect(await processesMentioning(result.root)).toEqual([]);
      for (const pid of natsSeen) expect(isRunning(pid), `nats-server pid ${pid}`).toBe(false);
      // A failed case keeps its processes' logs for whoever reads the failure; the test removes them.
      expect(existsSync(String(row?.logs))).toBe(true);
      await rm(result.root, { recursive: true, force: true });
    },
  );
});

/** Running = present and not a zombie (a killed orphan waits a moment for init to reap it). */
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}
