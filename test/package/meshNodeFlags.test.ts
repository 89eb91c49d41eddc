/**
 * The node flags `npm start` runs the mesh with (AMF_NODE_FLAGS in scripts/lib.sh, also what
 * `npm run bench` measures) are accepted by this Node and do what they are there for: the young
 * generation stays within 2 × 8 MB under allocation, where Node's default lets it grow to 2 × 16 MB.
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');

async function meshNodeFlags(env: NodeJS.ProcessEnv = {}): Promise<string[]> {
  const { stdout } = await run('bash', ['-c', '. scripts/lib.sh && printf %s "$AMF_NODE_FLAGS"'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, ...env },
  });
  return stdout.split(/\s+/).filter(Boolean);
}

/** Allocates short-lived garbage, then reports the young generation's committed size. */
const PROBE = `
const v8 = require('node:v8');
let keep = [];
for (let i = 0; i < 2e6; i += 1) { keep.push({ i, s: 'x' + i }); if (keep.length > 5e4) keep = []; }
const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');
process.stdout.write(String(s.space_size));
`;

async function youngGenerationBytes(flags: string[]): Promise<number> {
  const { stdout } = await run(process.execPath, [...flags, '-e', PROBE]);
  return Number(stdout);
}

describe('the mesh process node flags (scripts/lib.sh)', () => {
  it('cap the young generation below what Node does by default', { timeout: 60_000 }, async () => {
    const flags = await meshNodeFlags();
    expect(flags).toContain('--max-semi-space-size=8');
    const capped = await youngGenerationBytes(flags);
    const uncapped = await youngGenerationBytes([]);
    expect(capped).toBeGreaterThan(0);
    expect(capped).toBeLessThanOrEqual(16 * 1024 * 1024);
    expect(uncapped).toBeGreaterThan(capped);
  });

  it('can be replaced or emptied through AMF_NODE_FLAGS', async () => {
    expect(await meshNodeFlags({ AMF_NODE_FLAGS: '' })).toEqual([]);
    expect(await meshNodeFlags({ AMF_NODE_FLAGS: '--max-semi-space-size=4 --trace-gc' })).toEqual([
      '--max-semi-space-size=4',
      '--trace-gc',
    ]);
  });
});
