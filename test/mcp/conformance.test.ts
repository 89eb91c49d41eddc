/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16, server mode,
 * `--suite all`, 32 scenarios) against a worker that serves the suite's fixtures
 * (test/fixtures/mcpConformanceHandler.mjs) and against the coordinator's federated `/mcp` with
 * that worker admitted behind it, both at default settings but for bare names (`mcp.bare_names`:
 * the suite calls its tools, prompts and resources by their own names). Every check of every
 * scenario must pass on both, and the SSE polling scenario (SEP-1699) must check something: the
 * priming event and its `retry` on both, the resume of a stream the worker ended mid-call on the
 * worker (through the coordinator, the coordinator resumes it and its caller's stream never ends).
 * The suite is run through scripts/conformance-mcp.mjs's `runSuite` (its SUMMARY lines are parsed:
 * in server mode it writes no results directory); the tally is written to
 * $TMPDIR/amf-mcp-conformance.json.
 */
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';
import type { WorkerHandler } from '../../src/worker/handlerApi.js';
import { MeshWorker } from '../../src/worker/meshWorker.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { MCP_PROTOCOL } from '../../src/protocols/mcp/endpoint/endpoint.js';
import {
  CONTENT_RESULTS,
  PROGRESS_STEPS,
  startConformanceToolsServer,
} from '../fixtures/conformanceToolsServer.mjs';
// @ts-expect-error: a plain ESM script without types (it is also run on its own: npm run conformance)
import { runSuite } from '../../scripts/conformance-mcp.mjs';
// @ts-expect-error: a handler module without types
import conformanceHandler from '../fixtures/mcpConformanceHandler.mjs';

/** Where the per-scenario tally is written (outside the work tree). */
const RESULTS_FILE = join(tmpdir(), 'amf-mcp-conformance.json');
/** Scenarios in `--suite all` of 0.1.16. */
const SCENARIOS = 32;

interface ScenarioResult {
  scenario: string;
  passed: number;
  failed: number;
  warnings: number;
}

/** Checks the SSE polling scenario must pass (SEP-1699: priming event, retry, resume). */
const SSE_POLLING_CHECKS = { worker: 3, coordinator: 2 };

const run = runSuite as (url: string) => Promise<{ results: ScenarioResult[]; output: string }>;

describe('MCP conformance suite (server scenarios, --suite all)', () => {
  let mesh: TestMesh;
  let worker: RunningWorker;
  const summary: Record<string, ScenarioResult[]> = {};

  beforeAll(async () => {
    mesh = await startTestMesh({ config: { mcp: { bareNames: true } } });
    worker = await startWorker({
      name: 'mcp-conformance',
      tags: ['mcp-conformance'],
      handler: conformanceHandler as WorkerHandler,
      natsUrl: mesh.coordinator.natsUrl,
      credential: mesh.coordinator.credentials.specialist,
      port: 0,
      heartbeatSeconds: 1,
    });
    await mesh.waitFor(
      () => mesh.http.mcp.listTools().some((t) => t.name === 'test_image_content'),
      10_000,
      'the conformance worker federated under bare names',
    );
  }, 30_000);
  afterAll(async () => {
    await worker?.close(1000);
    await mesh?.close();
    await writeFile(RESULTS_FILE, `${JSON.stringify(summary, null, 2)}\n`).catch(() => undefined);
  });

  for (const target of ['worker', 'coordinator'] as const) {
    it(`${target} /mcp passes every scenario`, async () => {
      const base = target === 'coordinator' ? mesh.url : worker.url;
      // localhost: the DNS-rebinding scenario needs a host name it can swap.
      const { results, output } = await run(`${base.replace('127.0.0.1', 'localhost')}/mcp`);
      summary[target] = results;
      const failing = results.filter((r) => r.failed > 0).map((r) => r.scenario);
      console.log(
        `conformance ${target}: ${results.length - failing.length}/${results.length} scenarios passed`,
      );
      expect(results.length, output.slice(-3000)).toBe(SCENARIOS);
      expect(failing, output.slice(-3000)).toEqual([]);
      const polling = results.find((r) => r.scenario === 'server-sse-polling');
      expect(polling?.passed, output.slice(-3000)).toBe(SSE_POLLING_CHECKS[target]);
    }, 300_000);
  }
});

/**
 * The suite's content and progress scenarios call exact tool names (`test_image_content`), which
 * the coordinator never serves (its wire names are `<agent>__<tool>`). These tests run the same
 * checks with the official SDK client through the federation, against an agent that serves those
 * tools, and compare with what the agent itself returns: nothing may be lost or rewritten.
 */
describe('coordinator /mcp forwards agent results and progress faithfully', () => {
  let mesh: TestMesh;
  /** The suite's content tools on an agent that serves its own MCP endpoint (not a TS worker). */
  let toolsAgent: { worker: MeshWorker; server: Awaited<ReturnType<typeof startConformanceToolsServer>> };

  beforeAll(async () => {
    mesh = await startTestMesh();
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
  });

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

const simpleText: WorkerHandler = {
  name: 'test_simple_text',
  description: 'conformance fixture: returns simple text',
  inputSchema: { type: 'object', properties: {} },
  handle: () => Promise.resolve('This is a simple text response for testing.'),
};
