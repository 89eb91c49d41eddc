/**
 * Start-up benchmark: wall time and CPU time of short `amf` commands, run repeatedly like hyperfine
 * does (warm-up runs, then N timed runs of each command, the commands interleaved so a burst of load
 * from elsewhere hits them all alike), against the floor of Node itself (`node -e 0`).
 *
 *   amf --version                      (answered by bin/amf.js without loading the CLI)
 *   amf agents --coordinator URL       (the whole command: configuration, the operator key from the
 *                                       data dir, one GET /agents, output)
 *
 * `amf agents` talks to a real coordinator (bench/meshServer.js in a child process). CPU time of a
 * run is the user + system time of the finished child (from /proc/self/stat, children's fields).
 *
 * Environment: BENCH_STARTUP_RUNS (20), BENCH_STARTUP_WARMUP (3), BENCH_STARTUP_OUT (the page whose
 * section "Start-up" it overwrites; default docs/performance.md; "-" writes none).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { PERFORMANCE_PAGE, docSection, writeSection } from './lib/docSection.js';
import { ROOT, envNumber as envNumberOf, requireBuild, startMeshProcess } from './lib/meshProcess.js';
import { loadPhrase } from './lib/rounds.js';

requireBuild('bench/startup.js');
const envNumber = (key, fallback, min) => envNumberOf('bench/startup.js', key, fallback, min);
const RUNS = Math.round(envNumber('BENCH_STARTUP_RUNS', 20, 1));
const WARMUP = Math.round(envNumber('BENCH_STARTUP_WARMUP', 3, 0));
const OUT = process.env.BENCH_STARTUP_OUT ?? PERFORMANCE_PAGE;
const AMF = fileURLToPath(new URL('bin/amf.js', ROOT));
const TARGETS = { '--version': 150, agents: 300 };
const log = (line) => process.stderr.write(`${line}\n`);

/** CPU ms of this process's waited-for children so far (cutime + cstime, 10 ms ticks). */
function childrenCpuMs() {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

/** Runs one command to its end; returns wall ms and CPU ms, or throws when it failed. */
function runOnce(cmd) {
  const cpu0 = childrenCpuMs();
  const t0 = performance.now();
  const r = spawnSync(process.execPath, cmd.args, {
    encoding: 'utf8',
    // A developer's AMF_* settings and config file must not change what is measured.
    env: { PATH: process.env.PATH, HOME: os.tmpdir() },
  });
  const wall = performance.now() - t0;
  const cpu = childrenCpuMs() - cpu0;
  if (r.status !== 0 || !cmd.check(r.stdout))
    throw new Error(`${cmd.label}: exit ${r.status}: ${(r.stderr || r.stdout).slice(0, 300)}`);
  return { wall, cpu };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const min = (xs) => Math.min(...xs);

async function main() {
  const mesh = await startMeshProcess();
  const loadAtStart = os.loadavg();
  const commands = [
    { key: 'node', label: '`node -e 0` (the floor: Node itself)', args: ['-e', '0'], check: () => true },
    {
      key: '--version',
      label: '`amf --version`',
      args: [AMF, '--version'],
      check: (out) => /^\d+\.\d+\.\d+/.test(out),
    },
    {
      key: 'agents',
      label: '`amf agents` (one real coordinator)',
      // The mesh's data dir: `amf agents` reads the operator key from it, as its owner's CLI does.
      args: [AMF, 'agents', '--coordinator', mesh.info.coordinatorUrl, '--data-dir', mesh.info.dataDir],
      check: (out) => out.includes('bench-echo'),
    },
  ];
  /** @type {Record<string, { wall: number[], cpu: number[] }>} */
  const samples = Object.fromEntries(commands.map((c) => [c.key, { wall: [], cpu: [] }]));
  try {
    for (let i = 0; i < WARMUP; i++) for (const c of commands) runOnce(c);
    for (let i = 0; i < RUNS; i++) {
      // Rotated each run: no command always follows the same one.
      const k = i % commands.length;
      for (const c of [...commands.slice(k), ...commands.slice(0, k)]) {
        const { wall, cpu } = runOnce(c);
        samples[c.key].wall.push(wall);
        samples[c.key].cpu.push(cpu);
      }
    }
  } finally {
    await mesh.stop();
  }
  return { commands, samples, loadAtStart };
}

const { commands, samples, loadAtStart } = await main();
const floor = median(samples.node.wall);
const lines = [
  '| command | wall p50 | wall min | CPU p50 (user + system) | wall p50 over the floor | target (wall) |',
  '|---|---|---|---|---|---|',
];
const verdicts = [];
for (const c of commands) {
  const s = samples[c.key];
  const wall = median(s.wall);
  const target = TARGETS[c.key];
  lines.push(
    `| ${c.label} | ${wall.toFixed(0)} ms | ${min(s.wall).toFixed(0)} ms | ${median(s.cpu).toFixed(0)} ms | ${c.key === 'node' ? '–' : `+${(wall - floor).toFixed(0)} ms`} | ${target ? `≤ ${target} ms: ${wall <= target ? 'PASS' : 'MISS'}` : '–'} |`,
  );
  if (target)
    verdicts.push(
      `${c.label}: wall p50 ${wall.toFixed(0)} ms (target ≤ ${target} ms: ${wall <= target ? 'PASS' : 'MISS'})`,
    );
  log(
    `  ${c.key.padEnd(10)} wall p50 ${wall.toFixed(0)} ms  min ${min(s.wall).toFixed(0)} ms  CPU p50 ${median(s.cpu)} ms`,
  );
}
const table = lines.join('\n');
const load = loadPhrase();
process.stdout.write(`\n${table}\n\n${verdicts.map((v) => `- ${v}`).join('\n')}\n\n${load}\n`);
if (OUT !== '-') {
  const cpus = os.cpus();
  const section = `### Start-up

Made by \`npm run bench\` (this section: \`node bench/startup.js\`, after \`npm run build\`); ${RUNS} timed
runs of each command after ${WARMUP} warm-up runs, the commands interleaved in a rotated order. Machine:
${cpus[0]?.model.trim() ?? 'unknown'} × ${cpus.length}, Node ${process.version}; load average at start
${loadAtStart.map((l) => l.toFixed(2)).join(' ')}, ${load} at the end. Each run is a fresh \`node\` process with an
empty environment but \`PATH\` and \`HOME\` (a temp dir, so no configuration file). CPU is the finished
child's user + system time (10 ms ticks).

${table}
`;
  await writeSection(OUT, docSection('startup', 'bench/startup.js'), section);
  log(`bench/startup.js: wrote the "Start-up" section of ${OUT}`);
}
