// Prints one line for every phase of scripts/test.sh together, `N passed, N failed` (from the JSON
// report each vitest phase wrote), and exits non-zero when any phase failed or left no report.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
// The phases are named by scripts/test.sh; each left <name>.json, or nothing when it could not run.
const phases = (process.argv[3] ?? 'suite,faults,cluster').split(',');
let passed = 0;
let failed = 0;
let skipped = 0;
const problems = [];
for (const phase of phases) {
  const file = join(dir, `${phase}.json`);
  if (!existsSync(file)) {
    problems.push(`${phase}: no report (did it run?)`);
    continue;
  }
  const report = JSON.parse(readFileSync(file, 'utf8'));
  passed += report.numPassedTests ?? 0;
  failed += report.numFailedTests ?? 0;
  skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  // A file that failed to load counts no test but is a failure all the same.
  const brokenFiles = (report.testResults ?? []).filter(
    (r) => r.status === 'failed' && (r.assertionResults ?? []).length === 0,
  );
  for (const r of brokenFiles)
    problems.push(`${phase}: ${r.name} did not run: ${String(r.message).split('\n')[0]}`);
}
const failedPhases = existsSync(join(dir, 'failed'))
  ? readFileSync(join(dir, 'failed'), 'utf8').trim().split('\n')
  : [];
const ok = failed === 0 && problems.length === 0 && failedPhases.length === 0;
for (const p of problems) process.stdout.write(`!! ${p}\n`);
process.stdout.write(
  `==> all phases (${phases.join(', ')}): ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}` +
    `${failedPhases.length ? ` — failed phases: ${failedPhases.join(', ')}` : ''}\n`,
);
process.exit(ok ? 0 : 1);
