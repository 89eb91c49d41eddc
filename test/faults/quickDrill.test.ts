/**
 * The quick fault drill in CI: faults 1 (SIGKILL a worker), 2 (SIGSTOP a worker, quick), 5 (SIGKILL
 * the spawned nats-server), 8 (Ctrl-C on amf up --demo), 10 (SIGKILL the coordinator and a
 * worker together, restart the coordinator), 11 (the same with its only worker: the restarted
 * coordinator must end the held tasks itself, about 2 minutes later) and 12 (one of two
 * coordinators cut off from a 3-node cluster for 10 s, then healed: no task run twice), 14 (a worker
 * SIGKILLed mid-stream: no stream pieced from two executions) and 15 (a handler that never settles:
 * its attempts time out and go to the other worker), through
 * the same harness as `npm run faults -- --quick`. Each row must lose nothing, end no task twice,
 * answer every client with its own task's outcome and recover without help. It runs the built CLI
 * (dist/), so `npm run build` comes first, as in scripts/test.sh.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { runDrill, type DrillResult } from '../../scripts/faults/drill.mjs';
import { inPrivateNetns, killAllGroups } from '../../scripts/faults/procs.mjs';

const FAULTS = [1, 2, 5, 8, 10, 11, 12, 14, 15];

describe('quick fault drill', () => {
  let result: DrillResult | undefined;

  afterAll(() => killAllGroups());

  it(`runs faults ${FAULTS.join(', ')}`, { timeout: 9 * 60_000 }, async () => {
    // mDNS only inside a private network namespace (scripts/test.sh runs vitest in one).
    result = await runDrill({ quick: true, only: FAULTS, mdns: await inPrivateNetns() });
    expect(result.rows.map((r) => r.id)).toEqual(FAULTS);
  });

  for (const id of FAULTS) {
    it(`fault ${id}: nothing lost, nothing ended twice, recovered without help`, () => {
      const row = result?.rows.find((r) => r.id === id);
      expect(row, 'the drill did not produce this row').toBeDefined();
      expect(row?.ran).toBe(true);
      expect(row?.error, `process logs kept in ${row?.logs}`).toBeUndefined();
      expect({ id, lost: row?.lost, lostSample: row?.lostSample }).toEqual({ id, lost: 0, lostSample: [] });
      expect({ id, double: row?.double }).toEqual({ id, double: 0 });
      expect({ id, wrong: row?.wrong, wrongSample: row?.wrongSample }).toEqual({
        id,
        wrong: 0,
        wrongSample: [],
      });
      // Counted where the workers log their runs (fault 12).
      expect({ id, ranTwice: row?.ranTwice ?? 0 }).toEqual({ id, ranTwice: 0 });
      expect({ id, recovered: row?.recovered, why: row?.recoveryFailure }).toEqual({
        id,
        recovered: true,
        why: undefined,
      });
    });
  }
});
