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
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import { HandlerError, type WorkerHandler } from '../../src/worker/handlerApi.js';
import { MeshWorker } from '../../src/worker/meshWorker.js';
import type { RunningWorker } from '../../src/apps/workerApp.js';
import { MCP_PROTOCOL } from '../../src/protocols/mcp/mcpEndpoint.js';
import {
  CONTENT_RESULTS,
  PROGRESS_STEPS,
  startConformanceToolsServer,
} from '../fixtures/conformanceToolsServer.mjs';

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
/**
 * Exactly what passes in a full run (a newly passing scenario must be added here, and a regression
 * fails). The worker under test serves `test_simple_text`, so that scenario passes there too.
 */
const PASSING = {
  coordinator: [...REQUIRED].sort(),
  worker: [...REQUIRED, 'tools-call-simple-text'].sort(),
};
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
/** The suite's content tools on an agent that serves its own MCP endpoint (not a TS worker). */
let toolsAgent: { worker: MeshWorker; server: Awaited<ReturnType<typeof startConformanceToolsServer>> };
const summary: Record<string, ScenarioResult[]> = {};
let lastOutput = '';

beforeAll(async () => {
  mesh = await startTestMesh();
  worker = await mesh.startWorker('conformance-text', ['conformance-text'], simpleText);
  failing = await mesh.startWorker('conformance-error', ['conformance-error'], errorHandling);
  const server = await startConformanceToolsServer();
  const nc = await mesh.connect('specialist', 'conformance-tools');
  const agent = new MeshWorker(nc, {
    name: 'conformance-tools',
    tags: ['conformance-tools'],
    trustDomain: mesh.config.identity.trustDomain,
    endpoint: new URL(server.url).origin,
    handler: simpleText,
    heartbeatSeconds: 1,
    concurrency: 4,
    protocols: [MCP_PROTOCOL],
    mcpEndpoint: server.url,
  });
  toolsAgent = { worker: agent, server };
  await agent.start();
  await mesh.waitFor(
    () => mesh.http.mcp.listTools().some((t) => t.name.endsWith('__test_tool_with_progress')),
    10_000,
    'the conformance tools federated',
  );
}, 30_000);
afterAll(async () => {
  await toolsAgent?.worker.drain(1000).catch(() => undefined);
  await mesh?.close();
  await toolsAgent?.server.close();
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
      const passed = results.filter((r) => r.failure === 0 && r.success > 0).map((r) => r.scenario);
      expect(passed.sort()).toEqual(PASSING[target]);
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

/**
 * The suite's content and progress scenarios call exact tool names (`test_image_content`), which
 * the coordinator never serves (its wire names are `<agent>__<tool>`). These tests run the same
 * checks with the official SDK client through the federation, against an agent that serves those
 * tools, and compare with what the agent itself returns: nothing may be lost or rewritten.
 */
describe('coordinator /mcp forwards agent results and progress faithfully', () => {
  async function connect(url: string): Promise<Client> {
    const client = new Client({ name: 'amf-conformance-check', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    return client;
  }

  it('passes image, audio, embedded-resource and mixed content through unchanged', async () => {
    const viaMesh = await connect(`${mesh.url}/mcp`);
    const direct = await connect(toolsAgent.server.url);
    try {
      const wire = new Map((await viaMesh.listTools()).tools.map((t) => [t.name.split('__').pop()!, t.name]));
      for (const [tool, expected] of Object.entries(CONTENT_RESULTS)) {
        const wireName = wire.get(tool);
        expect(wireName, `${tool} is federated`).toMatch(/__/);
        const forwarded = await viaMesh.callTool({ name: wireName!, arguments: {} });
        const original = await direct.callTool({ name: tool, arguments: {} });
        expect(forwarded.isError, tool).toBeFalsy();
        expect(forwarded.content, tool).toEqual(expected.content);
        expect(forwarded.content, tool).toEqual(original.content);
      }
    } finally {
      await viaMesh.close();
      await direct.close();
    }
  });

  it('hands the agent progress notifications of a forwarded call to the caller', async () => {
    const wireName = mesh.http.mcp
      .listTools()
      .find((t) => t.name.endsWith('__test_tool_with_progress'))!.name;
    const seen: Progress[] = [];
    const result = await mesh.http.mcp.call(
      wireName,
      {},
      { caller: 'conformance-test', sessionId: null },
      undefined,
      (p) => seen.push(p),
    );
    expect(result.isError).toBeFalsy();
    expect(seen.map((p) => [p.progress, p.total, p.message])).toEqual(
      Array.from({ length: PROGRESS_STEPS }, (_, i) => [i + 1, PROGRESS_STEPS, `step ${i + 1}`]),
    );
    // End to end: an SDK client asking for progress on the coordinator's /mcp gets the agent's.
    const client = await connect(`${mesh.url}/mcp`);
    try {
      const relayed: Progress[] = [];
      const viaMesh = await client.callTool({ name: wireName, arguments: {} }, undefined, {
        onprogress: (p) => relayed.push(p),
      });
      expect(viaMesh.isError).toBeFalsy();
      expect(relayed.map((p) => p.progress)).toEqual(Array.from({ length: PROGRESS_STEPS }, (_, i) => i + 1));
    } finally {
      await client.close();
    }
    // Without a listener the call carries no progress token and the agent reports nothing.
    const quiet = await mesh.http.mcp.call(wireName, {}, { caller: 'conformance-test', sessionId: null });
    expect(quiet.content).toEqual([{ type: 'text', text: 'progress reported' }]);
  });
});
