/**
 * The official A2A TCK (a2aproject/a2a-tck, 1.0) in the test suite, at default settings: runs
 * `scripts/conformance.mjs --suite a2a --no-build` (a coordinator with a mesh of two agents, the TCK
 * example worker and an echo worker, and the TCK against the coordinator and against the worker;
 * docs/a2a.md, "Conformance"), which exits 0 only when every MUST passes but the known ones it
 * names. Needs `npm run build`, the TCK's source (`../shared/tools/a2a-tck` or AMF_A2A_TCK_DIR) and
 * its venv, which `node scripts/conformance.mjs --prepare` installs from PyPI before the tests'
 * network namespace (scripts/test.sh); without them it is skipped and says why. Runs as a phase of
 * its own (scripts/test.sh): it drives two TCK runs of about two minutes each.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { workerAgentCard } from '../../src/protocols/a2a/agentCards.js';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const TCK_DIR = resolve(process.env.AMF_A2A_TCK_DIR ?? join(ROOT, '..', 'shared', 'tools', 'a2a-tck'));
const TCK_PYTHON = join(homedir(), '.cache', 'amf', 'a2a-tck-venv', 'bin', 'python');
/** Where the run's output is kept (outside the work tree). */
const OUTPUT_FILE = join(tmpdir(), 'amf-a2a-tck.txt');

const missing = !existsSync(join(TCK_DIR, 'run_tck.py'))
  ? `no A2A TCK at ${TCK_DIR} (AMF_A2A_TCK_DIR)`
  : !existsSync(TCK_PYTHON)
    ? `no TCK venv at ${TCK_PYTHON} (node scripts/conformance.mjs --prepare)`
    : !existsSync(join(ROOT, 'dist', 'index.js'))
      ? 'no build (npm run build)'
      : undefined;

function runConformance(): Promise<{ code: number | null; output: string }> {
  return new Promise((done, fail) => {
    const child = spawn(
      process.execPath,
      [join(ROOT, 'scripts', 'conformance.mjs'), '--suite', 'a2a', '--no-build'],
      { cwd: ROOT, env: { ...process.env, AMF_A2A_TCK_DIR: TCK_DIR }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (b: Buffer) => (output += b.toString()));
    child.stderr.on('data', (b: Buffer) => (output += b.toString()));
    child.on('error', fail);
    child.on('exit', (code) => done({ code, output }));
  });
}

/** Validates card files against the TCK's own 1.0 JSON schema ("Agent Card"); prints the errors. */
const VALIDATE = `
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tck.validators.json_schema import JSONSchemaValidator
v = JSONSchemaValidator(Path(sys.argv[1]) / 'specification' / 'a2a.json')
print(json.dumps([v.validate(json.load(open(f)), 'Agent Card').errors for f in sys.argv[2:]]))`;

describe.skipIf(missing !== undefined)('the A2A TCK against the mesh at default settings', () => {
  it('the strict card (A2A-Version: 1.0), security schemes included, validates against its schema', async () => {
    const worker = { agentId: 'spiffe://local/w', agentRecord: () => ({ protocols_supported: ['A2A/1.0'] }) };
    const options = { name: 'w', tags: ['w'], trustDomain: 'local', handler: { description: 'w' } };
    const cards = [
      workerAgentCard(worker as never, options, 'http://127.0.0.1:9'),
      workerAgentCard(worker as never, options, 'http://10.0.0.5:9'),
      workerAgentCard(worker as never, { ...options, spiffe: true }, 'http://10.0.0.5:9'),
    ];
    const dir = await mkdtemp(join(tmpdir(), 'amf-tck-cards-'));
    try {
      const files = await Promise.all(
        cards.map(async (card, i) => {
          const file = join(dir, `card-${i}.json`);
          await writeFile(file, JSON.stringify(card));
          return file;
        }),
      );
      const out = await new Promise<string>((done, fail) =>
        execFile(
          TCK_PYTHON,
          ['-c', VALIDATE, TCK_DIR, ...files],
          { timeout: 60_000 },
          (err, stdout, stderr) => (err ? fail(new Error(`${err.message}\n${stderr}`)) : done(stdout)),
        ),
      );
      expect(JSON.parse(out)).toEqual([[], [], []]);
      expect(cards[2]).toHaveProperty('securitySchemes');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it(
    'passes every MUST on the coordinator (two agents, plain client) and the worker',
    { timeout: 900_000 },
    async () => {
      const { code, output } = await runConformance();
      await writeFile(OUTPUT_FILE, output);
      // One row per target: | A2A TCK | coordinator | tests | MUST pass / fail / skip | ...
      const rows = [...output.matchAll(/^\| A2A TCK \| (\w+) \| [^|]+\| (\d+) \/ (\d+) \/ (\d+) \|/gm)];
      expect(
        rows.map((r) => r[1]),
        output.slice(-3000),
      ).toEqual(['coordinator', 'worker']);
      for (const row of rows) expect(Number(row[2]), `${row[1]} MUST passed`).toBeGreaterThanOrEqual(72);
      expect(code, `conformance.mjs failed (output in ${OUTPUT_FILE}):\n${output.slice(-3000)}`).toBe(0);
    },
  );
});

if (missing !== undefined) console.warn(`A2A TCK test skipped: ${missing}`);
