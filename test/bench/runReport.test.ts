/**
 * The report of `npm run bench` (bench/lib/runReport.js), from made-up rounds: medians over rounds,
 * mesh paired with direct within each round, and the section's tables and verdicts. The section is
 * what a reader compares across runs, so its shape is pinned here without running a mesh.
 */
import { describe, expect, it } from 'vitest';

interface Result {
  path: string;
  concurrency: number;
  ok: number;
  errors: number;
  firstError?: Error;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  throughput: number;
  roundThroughputs?: number[];
  cpu: Record<string, number | undefined>;
}
interface Paired {
  perRound: { p50Delta: number; throughputRatio: number }[];
  p50Delta: number;
  throughputRatio: number;
}
interface RunReport {
  mergeRounds(rounds: Result[][]): Result[];
  pairedRounds(rounds: Result[][]): Map<number, Paired>;
  renderReport(input: {
    results: Result[];
    paired: Map<number, Paired>;
    memory: undefined;
    info: Record<string, unknown>;
    ed25519Backend: string;
  }): { table: string; document: string };
}

// bench/ is plain JavaScript without declarations: imported through a computed specifier.
const modulePath = new URL('../../bench/lib/runReport.js', import.meta.url).href;
const report = (await import(modulePath)) as RunReport;

const result = (path: string, concurrency: number, p50: number, throughput: number): Result => ({
  path,
  concurrency,
  ok: 100,
  errors: 0,
  p50,
  p90: p50 * 2,
  p99: p50 * 3,
  max: p50 * 4,
  throughput,
  cpu: {
    gen: 10,
    mesh: 20,
    worker: undefined,
    nats: 5,
    meshSyscalls: 2,
    meshUtilisation: 0.5,
    otherLoad: 0.1,
  },
});
const round = (meshP50: number, meshRate: number): Result[] => [
  result('direct', 1, 1, 1000),
  result('mesh', 1, meshP50, 200),
  result('direct', 64, 10, 5000),
  result('mesh', 64, 20, meshRate),
];
// Three rounds: the middle values are the medians.
const rounds = [round(1.5, 3500), round(3, 2000), round(1.25, 4000)];

describe('the report of npm run bench', () => {
  it('takes the median of every figure over the rounds and sums the counts', () => {
    const merged = report.mergeRounds(rounds);
    const mesh64 = merged.find((r) => r.path === 'mesh' && r.concurrency === 64);
    expect(mesh64?.throughput).toBe(3500);
    expect(mesh64?.roundThroughputs).toEqual([3500, 2000, 4000]);
    expect(mesh64?.ok).toBe(300);
    expect(merged.find((r) => r.path === 'mesh' && r.concurrency === 1)?.p50).toBe(1.5);
  });

  it('judges mesh against direct within each round', () => {
    const paired = report.pairedRounds(rounds);
    expect(paired.get(1)?.perRound.map((r) => r.p50Delta)).toEqual([0.5, 2, 0.25]);
    expect(paired.get(1)?.p50Delta).toBe(0.5);
    expect(paired.get(64)?.throughputRatio).toBe(0.7);
  });

  it('renders the section: latency table, targets with their verdicts, and the summary table inside it', () => {
    const { table, document } = report.renderReport({
      results: report.mergeRounds(rounds),
      paired: report.pairedRounds(rounds),
      memory: undefined,
      info: { pid: 1, workerPid: 1, floorSubject: 'bench.floor' },
      ed25519Backend: 'test-backend',
    });
    expect(document).toContain('| path | concurrency | p50 (ms) | p99 (ms) | throughput (req/s) | errors |');
    expect(document).toContain('| (c) mesh: /v1/chat/completions | 64 | 20.000 | 60.000 | 3,500 | 0 |');
    // 0.5 ms over direct at concurrency 1 is within the 1 ms target; 3,500 req/s meets 3,000.
    expect(document).toMatch(
      /\| mesh p50 − direct p50 at concurrency 1 ≤ 1\.0 ms[^|]*\| 0\.500 ms \| \*\*PASS\*\* \|/,
    );
    expect(document).toMatch(
      /\| mesh throughput at concurrency 64 ≥ 3,000 req\/s[^|]*\| 3,500 req\/s[^|]*\| \*\*PASS\*\* \|/,
    );
    expect(document).toContain('Ed25519 test-backend');
    expect(document.startsWith('### Mesh against direct and the NATS floor\n')).toBe(true);
    expect(document).toContain('\n#### Targets\n');
    expect(document).not.toMatch(/\d{4}-\d{2}-\d{2}T/); // undated: history is git's
    expect(document).toContain(table);
  });

  it('misses the overhead target when the mesh is slower than 1 ms over direct', () => {
    const slow = [round(4, 3500), round(5, 3500), round(6, 3500)];
    const { document } = report.renderReport({
      results: report.mergeRounds(slow),
      paired: report.pairedRounds(slow),
      memory: undefined,
      info: { pid: 1, workerPid: 1 },
      ed25519Backend: 'test-backend',
    });
    expect(document).toMatch(
      /\| mesh p50 − direct p50 at concurrency 1 ≤ 1\.0 ms[^|]*\| 4\.000 ms \| \*\*MISS\*\* \|/,
    );
  });
});
