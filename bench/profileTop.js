/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`): where the samples landed, by function (self
 * time), by package or file (self time), and the inclusive time of AMF's own functions.
 *
 *   BENCH_CHILD_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/amf-prof" BENCH_PATHS=mesh BENCH_CONCURRENCY=64 \
 *     BENCH_TASKS=0 BENCH_OUT=- npm run bench
 *   node bench/profileTop.js /tmp/amf-prof/CPU.*.cpuprofile [top=25]
 *
 * Environment (all optional):
 *   PROFILE_TIMELINE=1      first print the busy share of each second of the profile (to find a window)
 *   PROFILE_WINDOW=a-b      count only the samples from second a to second b after the profile started
 *                           (e.g. the measurement of one path, not the start-up before it)
 *   PROFILE_REQUESTS=n      requests completed in that window: times are then also shown as µs/request
 *   PROFILE_CALLERS=text    also print the heaviest call stacks of the functions whose label has `text`
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

const WINDOW = (process.env.PROFILE_WINDOW ?? '').split('-').map(Number);
const [FROM_S, TO_S] = WINDOW.length === 2 && WINDOW.every(Number.isFinite) ? WINDOW : [0, Infinity];
const REQUESTS = Number(process.env.PROFILE_REQUESTS ?? 0);

// Sample weights: time deltas in µs, kept when the sample falls in the window.
const self = new Map();
const perSecond = [];
let total = 0;
let at = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const dt = profile.timeDeltas[i] ?? 0;
  at += dt;
  const second = Math.floor(at / 1e6);
  const idle = nodes.get(profile.samples[i])?.callFrame.functionName === '(idle)';
  perSecond[second] ??= { busy: 0, all: 0 };
  perSecond[second].all += dt;
  if (!idle) perSecond[second].busy += dt;
  if (at < FROM_S * 1e6 || at > TO_S * 1e6) continue;
  self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + dt);
  total += dt;
}
if (process.env.PROFILE_TIMELINE) {
  process.stdout.write('second  busy\n');
  perSecond.forEach((s, i) => {
    if (s)
      process.stdout.write(
        `${String(i).padStart(6)}  ${((s.busy / s.all) * 100).toFixed(0).padStart(3)} %\n`,
      );
  });
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

const pct = (t) =>
  `${((t / total) * 100).toFixed(1).padStart(5)} %` +
  (REQUESTS > 0 ? `  ${(t / REQUESTS).toFixed(0).padStart(5)} µs/req` : '');
const print = (title, map) => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, t] of [...map].sort((a, b) => b[1] - a[1]).slice(0, TOP))
    process.stdout.write(`${pct(t)}  ${k}\n`);
};
process.stdout.on('error', () => process.exit(0));
process.stdout.write(
  `${file}: ${(total / 1e6).toFixed(2)} s sampled` +
    (Number.isFinite(TO_S) || FROM_S > 0 ? ` (seconds ${FROM_S}–${TO_S})` : '') +
    (REQUESTS > 0 ? `, ${REQUESTS} requests` : '') +
    '\n',
);
print('Self time by package / file', byWhere);
print('Self time by function', byFn);
print('Inclusive time of AMF functions', inclusiveAmf);

const CALLERS = process.env.PROFILE_CALLERS;
if (CALLERS) {
  const stacks = new Map();
  for (const [id, t] of self) {
    if (!label(nodes.get(id).callFrame).includes(CALLERS)) continue;
    const chain = [];
    for (let cur = id; cur !== undefined && chain.length < 12; cur = parent.get(cur))
      chain.push(label(nodes.get(cur).callFrame));
    const key = chain.join('\n      <- ');
    stacks.set(key, (stacks.get(key) ?? 0) + t);
  }
  print(`Heaviest stacks of "${CALLERS}"`, new Map([...stacks].slice(0)));
}
