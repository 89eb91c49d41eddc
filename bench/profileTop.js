/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`): where the samples landed, by function (self
 * time), by package or file (self time), and the inclusive time of AMF's own functions.
 *
 *   BENCH_CHILD_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/amf-prof" BENCH_PATHS=mesh BENCH_CONCURRENCY=64 \
 *     BENCH_TASKS=0 BENCH_OUT=- npm run bench
 *   node bench/profileTop.js /tmp/amf-prof/CPU.*.cpuprofile [top=25]
 */
import { readFileSync } from 'node:fs';

const [file, topArg] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: node bench/profileTop.js FILE.cpuprofile [top]\n');
  process.exit(2);
}
const TOP = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Sample weights: time deltas in µs.
const self = new Map();
let total = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const dt = profile.timeDeltas[i] ?? 0;
  self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + dt);
  total += dt;
}

function where(cf) {
  const url = cf.url || '';
  if (!url) return cf.functionName.startsWith('(') ? cf.functionName : '(native / V8 builtin)';
  if (url.startsWith('node:')) return url;
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  const dist = url.indexOf('/dist/');
  if (dist >= 0) return `amf:${url.slice(dist + 1)}`;
  const bench = url.indexOf('/bench/');
  if (bench >= 0) return `bench:${url.slice(bench + 1)}`;
  return url;
}

const label = (cf) => `${cf.functionName || '(anonymous)'} ${where(cf)}:${cf.lineNumber + 1}`;
const byFn = new Map();
const byWhere = new Map();
const inclusiveAmf = new Map();
for (const [id, t] of self) {
  const cf = nodes.get(id).callFrame;
  byFn.set(label(cf), (byFn.get(label(cf)) ?? 0) + t);
  byWhere.set(where(cf), (byWhere.get(where(cf)) ?? 0) + t);
  // Inclusive time of each AMF function on the stack (counted once per sample stack).
  const seen = new Set();
  for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
    const f = nodes.get(cur).callFrame;
    if (!where(f).startsWith('amf:')) continue;
    const key = label(f);
    if (seen.has(key)) continue;
    seen.add(key);
    inclusiveAmf.set(key, (inclusiveAmf.get(key) ?? 0) + t);
  }
}

const pct = (t) => `${((t / total) * 100).toFixed(1).padStart(5)} %`;
const print = (title, map) => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, t] of [...map].sort((a, b) => b[1] - a[1]).slice(0, TOP))
    process.stdout.write(`${pct(t)}  ${k}\n`);
};
process.stdout.on('error', () => process.exit(0));
process.stdout.write(`${file}: ${(total / 1e6).toFixed(2)} s sampled\n`);
print('Self time by package / file', byWhere);
print('Self time by function', byFn);
print('Inclusive time of AMF functions', inclusiveAmf);
