import { describe, expect, it } from 'vitest';
import { DenialReporter } from '../../src/admission/denialReporter.js';
import type { PolicyNotices } from '../../src/registry/policyNotices.js';

/** Records what would be published; the reporter's logic is what is under test here. */
function recordingNotices() {
  const denies: unknown[] = [];
  const warnings: Array<{ reason: string; details?: { count?: number } }> = [];
  const notices = {
    deny: (p: unknown) => denies.push(p),
    warn: (p: { reason: string; details?: { count?: number } }) => warnings.push(p),
  } as unknown as PolicyNotices;
  return { notices, denies, warnings };
}

describe('denial reporter', () => {
  it('reports each distinct denial once per window and sums up the rest', () => {
    const { notices, denies, warnings } = recordingNotices();
    const reporter = new DenialReporter(notices, {
      ratePerSecond: 1000,
      burst: 1000,
      summaryIntervalMs: 60_000,
    });
    for (let i = 0; i < 5; i++) reporter.deny('src|invalid_tag|a', { reason: 'invalid_tag', message: 'x' });
    reporter.deny('src|invalid_tag|b', { reason: 'invalid_tag', message: 'y' });
    expect(denies).toHaveLength(2);
    expect(reporter.suppressedCount).toBe(4);
    reporter.close();
    expect(warnings).toEqual([
      expect.objectContaining({ reason: 'denials_suppressed', details: { count: 4 } }),
    ]);
  });

  it('caps the notices a flood of distinct bad advertisements can cause', () => {
    const { notices, denies } = recordingNotices();
    const reporter = new DenialReporter(notices, {
      ratePerSecond: 50,
      burst: 100,
      summaryIntervalMs: 60_000,
    });
    for (let i = 0; i < 10_000; i++)
      reporter.deny(`src|invalid_tag|agent-${i}`, { reason: 'invalid_tag', message: `m${i}` });
    expect(denies.length).toBeLessThanOrEqual(101);
    expect(reporter.suppressedCount).toBe(10_000 - denies.length);
    reporter.close();
  });
});
