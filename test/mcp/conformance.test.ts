/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, server mode, active suite)
 * against the coordinator's federated `/mcp` and a worker's `/mcp`. AMF endpoints serve only tools,
 * so the resources, prompts, logging, completion, sampling and elicitation scenarios fail by design;
 * so do the suite's fixture-tool scenarios on the coordinator, whose wire names are always
 * namespaced (`<agent>__test_simple_text`). Fixture workers named after the suite's tools
 * (`test_simple_text`, `test_error_handling`) show the worker side of tool calls. The protocol
 * scenarios (initialize, ping, tools/list, SSE streams, DNS-rebinding protection) must pass. The
 * per-scenario counts are printed and written to $TMPDIR/amf-mcp-conformance.json; the suite's own
 * tally (its SUMMARY lines) is parsed: in server mode it writes no results directory.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { HandlerError, type WorkerHandler } from '../../src/worker/handlerApi.js';
import type { RunningWorker } from '../../src/worker/startWorker.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SUITE = join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const SHIM = join(ROOT, 'test/mcp/conformance/node20-shim.mjs');
/** Scenarios every AMF MCP endpoint must pass. */
const REQUIRED = [
  'server-initialize',
  'ping',
  'tools-list',
  'server-sse-multiple-streams',
  'dns-rebinding-protection',
];
/** Where the per-scenario tally is written (outside the work tree). */
const RESULTS_FILE = join(tmpdir(), 'amf-mcp-conformance.json');

interface ScenarioResult {
  scenario: string;
  success: number;
  failure: number;
}

/**
 * Fixture agents with the suite's tool names (one tool per worker: a worker serves its handler).
 * Their schema declares no properties, so the suite may call them without arguments.
 */
const NO_ARGS = { type: 'object' as const, properties: {} };
const simpleText: WorkerHandler = {
  name: 'test_simple_text',
  description: 'conformance fixture: returns simple text',
  inputSchema: NO_ARGS,
  handle: () => Promise.resolve('This is a simple text response for testing.'),
};
const errorHandling: WorkerHandler = {
  name: 'test_error_handling',
  description: 'conformance fixture: fails on purpose',
  inputSchema: NO_ARGS,
  handle: () =>
    Promise.reject(new HandlerError('fixture_error', 'This tool intentionally returns an error for testing')),
};

let mesh: TestMesh;
let worker: RunningWorker;
let failing: RunningWorker;
const summary: Record<string, ScenarioResult[]> = {};
let lastOutput = '';

beforeAll(async () => {
  mesh = await startTestMesh();
  worker = await mesh.startWorker('conformance-text', ['conformance-text'], simpleText);
  failing = await mesh.startWorker('conformance-error', ['conformance-error'], errorHandling);
}, 30_000);
afterAll(async () => {
  await mesh?.close();
  await writeFile(RESULTS_FILE, `${JSON.stringify(summary, null, 2)}\n`).catch(() => undefined);
});

/** Runs the active server suite against `url` in a temp dir and tallies every checks.json. */
async function runSuite(url: string, scenario?: string): Promise<ScenarioResult[]> {
  const cwd = await mkdtemp(join(tmpdir(), 'amf-conformance-'));
  try {
    const output = await new Promise<string>((resolve) => {
      // Node 20: the shim lets the suite's bundle link (it imports fs.globSync from Node 22).
      execFile(
        process.execPath,
        ['--import', SHIM, SUITE, 'server', '--url', url, ...(scenario ? ['--scenario', scenario] : [])],
        { cwd, timeout: 240_000, maxBuffer: 32 * 1024 * 1024 },
        // A non-zero exit only means some scenario failed; the checks say which.
        (_err, stdout, stderr) => resolve(`${stdout}\n${stderr}`),
      );
    });
    lastOutput = output;
    // The suite's SUMMARY block: `✓ name: N passed, M failed` per scenario.
    const results: ScenarioResult[] = [];
    for (const m of output.matchAll(/^[✓✗] ([\w.-]+): (\d+) passed, (\d+) failed/gmu))
      results.push({ scenario: m[1]!, success: Number(m[2]), failure: Number(m[3]) });
    // A single scenario prints `Passed: N/M, F failed, W warnings` instead.
    const single = scenario ? /Passed: (\d+)\/\d+, (\d+) failed/.exec(output) : null;
    if (single) results.push({ scenario: scenario!, success: Number(single[1]), failure: Number(single[2]) });
    return results;
  } finally {
    await rm(cwd, { recursive: true, force: true });
  }
}

function report(name: string, results: ScenarioResult[]): void {
  summary[name] = results;
  const passed = results.filter((r) => r.failure === 0).length;
  const lines = results.map(
    (r) =>
      `  ${r.failure === 0 ? 'PASS' : 'FAIL'} ${r.scenario} (${r.success} checks passed, ${r.failure} failed)`,
  );
  console.log(`conformance ${name}: ${passed}/${results.length} scenarios passed\n${lines.join('\n')}`);
}

describe('MCP conformance suite (server scenarios)', () => {
  for (const target of ['coordinator', 'worker'] as const) {
    it(`${target} /mcp passes the protocol scenarios`, async () => {
      const url = target === 'coordinator' ? `${mesh.url}/mcp` : `${worker.url}/mcp`;
      const results = await runSuite(url.replace('127.0.0.1', 'localhost'));
      report(target, results);
      expect(results.length, lastOutput.slice(-3000)).toBeGreaterThan(10);
      for (const name of REQUIRED) {
        const r = results.find((x) => x.scenario === name);
        expect(r, `${name} ran`).toBeDefined();
        expect(r!.failure, `${name} passes`).toBe(0);
      }
    }, 300_000);
  }

  it('worker fixtures pass the tool-call scenarios for their tools', async () => {
    const text = await runSuite(
      `${worker.url.replace('127.0.0.1', 'localhost')}/mcp`,
      'tools-call-simple-text',
    );
    const error = await runSuite(`${failing.url.replace('127.0.0.1', 'localhost')}/mcp`, 'tools-call-error');
    report('worker fixtures', [...text, ...error]);
    expect(text).toEqual([{ scenario: 'tools-call-simple-text', success: 1, failure: 0 }]);
    expect(error).toEqual([{ scenario: 'tools-call-error', success: 1, failure: 0 }]);
  }, 120_000);
});
