#!/usr/bin/env node
// Runs the official MCP conformance suite (@modelcontextprotocol/conformance, `server --suite all`)
// against a worker that serves the suite's fixtures (test/fixtures/mcpConformanceHandler.mjs: the
// fixture handler test/fixtures/mcpConformanceBase.mjs plus `test_reconnection`) and against the
// coordinator's federated `/mcp` with that worker admitted behind it, then prints one table
// (markdown) of every scenario on both. Both run at default settings, but for `mcp.bare_names`
// (the suite calls its fixtures by their own names). Needs `npm run build` first; nats-server and
// the policy bundle as for `amf up`. Exit code 1 when a check fails on either endpoint.
//
//   node scripts/conformance-mcp.mjs [--json FILE] [--scenario NAME]
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SUITE = join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
// Node 20: the suite's bundle imports fs.globSync (Node 22+) on a path server mode never calls.
const SHIM = join(ROOT, 'test/mcp/conformance/node20-shim.mjs');
const dist = (p) => import(pathToFileURL(join(ROOT, 'dist', p)).href);

const args = process.argv.slice(2);
const option = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};

/** Runs the suite against `url`; resolves with [{scenario, passed, failed, warnings}]. */
export function runSuite(url, scenario) {
  return new Promise((resolve) => {
    void mkdtemp(join(tmpdir(), 'amf-mcp-conformance-')).then((cwd) => {
      const argv = ['--import', SHIM, SUITE, 'server', '--url', url];
      argv.push(...(scenario ? ['--scenario', scenario] : ['--suite', 'all']));
      execFile(
        process.execPath,
        argv,
        { cwd, timeout: 300_000, maxBuffer: 64 << 20 },
        (_err, stdout, stderr) => {
          void rm(cwd, { recursive: true, force: true });
          const output = `${stdout}\n${stderr}`;
          const results = [];
          for (const m of output.matchAll(
            /^[✓✗] ([\w.-]+): (\d+) passed, (\d+) failed(?:, (\d+) warnings)?/gmu,
          ))
            results.push({
              scenario: m[1],
              passed: Number(m[2]),
              failed: Number(m[3]),
              warnings: Number(m[4] ?? 0),
            });
          const single = scenario
            ? /Passed: (\d+)\/\d+, (\d+) failed(?:, (\d+) warnings)?/.exec(output)
            : null;
          if (single)
            results.push({
              scenario,
              passed: Number(single[1]),
              failed: Number(single[2]),
              warnings: Number(single[3] ?? 0),
            });
          resolve({ results, output });
        },
      );
    });
  });
}

async function main() {
  const { loadConfig } = await dist('config/config.js');
  const { Coordinator } = await dist('coordinator/coordinator.js');
  const { startCoordinatorHttp } = await dist('apps/coordinatorApp.js');
  const { startWorker } = await dist('apps/workerApp.js');
  const handler = (await import(pathToFileURL(join(ROOT, 'test/fixtures/mcpConformanceHandler.mjs')).href))
    .default;
  const dataDir = await mkdtemp(join(tmpdir(), 'amf-mcp-conformance-mesh-'));
  const config = await loadConfig({
    env: { HOME: tmpdir() },
    flags: {
      dataDir,
      logLevel: 'silent',
      coordinator: { port: 0 },
      nats: { port: 0 },
      heartbeat: { intervalSeconds: 1, offlineAfterMissed: 3 },
      mdns: { enabled: false },
      // The suite calls the fixtures by their bare names (docs/mcp.md, "Bare names").
      mcp: { bareNames: true },
    },
  });
  // The conformance worker connects as the shared specialist user (events still signed), which the
  // spawned server carries only when asked for (as in bench/meshServer.js).
  const coordinator = await Coordinator.start({ config, legacySpecialistUser: true });
  const http = await startCoordinatorHttp(coordinator);
  let worker;
  try {
    worker = await startWorker({
      name: 'mcp-conformance',
      tags: ['mcp-conformance'],
      handler,
      natsUrl: coordinator.natsUrl,
      credential: coordinator.credentials.specialist,
      port: 0,
      heartbeatSeconds: 1,
    });
    const deadline = Date.now() + 15_000;
    while (!http.mcp.listTools().some((t) => t.name === 'test_image_content')) {
      if (Date.now() > deadline) throw new Error('the conformance worker was not federated within 15 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const scenario = option('--scenario');
    // localhost: the suite's DNS-rebinding scenario needs a host name it can swap.
    const targets = {
      worker: `${worker.url.replace('127.0.0.1', 'localhost')}/mcp`,
      coordinator: `${http.url.replace('127.0.0.1', 'localhost')}/mcp`,
    };
    const runs = {};
    for (const [name, url] of Object.entries(targets)) runs[name] = await runSuite(url, scenario);
    const names = [...new Set(Object.values(runs).flatMap((r) => r.results.map((x) => x.scenario)))];
    const cell = (name, scenarioName) => {
      const r = runs[name].results.find((x) => x.scenario === scenarioName);
      if (!r) return 'not run';
      const warned = r.warnings > 0 ? `, ${r.warnings} warnings` : '';
      return r.failed === 0
        ? `pass (${r.passed}${warned})`
        : `FAIL (${r.failed} of ${r.passed + r.failed}${warned})`;
    };
    const lines = ['| Scenario | Worker | Coordinator |', '| --- | --- | --- |'];
    for (const n of names) lines.push(`| ${n} | ${cell('worker', n)} | ${cell('coordinator', n)} |`);
    const total = (name) => {
      const rs = runs[name].results;
      return `${rs.filter((r) => r.failed === 0).length}/${rs.length}`;
    };
    lines.push(`| **total** | **${total('worker')}** | **${total('coordinator')}** |`);
    console.log(lines.join('\n'));
    const json = option('--json');
    if (json)
      await writeFile(
        json,
        `${JSON.stringify(Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, v.results])), null, 2)}\n`,
      );
    if (process.env.AMF_CONFORMANCE_VERBOSE)
      for (const [k, v] of Object.entries(runs)) console.log(`--- ${k}\n${v.output}`);
    const failed = Object.values(runs).some(
      (r) => r.results.length === 0 || r.results.some((x) => x.failed > 0),
    );
    process.exitCode = failed ? 1 : 0;
  } finally {
    await worker?.close?.().catch(() => undefined);
    await http.close().catch(() => undefined);
    await coordinator.close().catch(() => undefined);
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
