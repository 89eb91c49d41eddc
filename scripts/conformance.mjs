// `npm run conformance`: the official conformance suites against a real mesh at default settings.
// Starts a coordinator (no mDNS) and a mesh of two agents, the TCK example worker
// (test/fixtures/tckAgent.mjs) and an echo worker, runs each suite against the coordinator and against
// the TCK worker, and prints one table. The TCK sends no AMF metadata, as any plain A2A client: the
// coordinator routes its messages by skill, else to its default agent, which `<data-dir>/amf.yaml`
// names as a user would (`a2a.default_agent: tck`). Suites are entries of SUITES: a suite is
// { name, prepare(), run(target) -> rows }.
// Options: --suite NAME (only that suite), --level must|should|may (TCK levels), --keep (keep logs),
// --no-build (dist/ is current), --prepare (only install what the suites need, e.g. the TCK's venv,
// then exit: scripts/test.sh runs it before the tests' network namespace, which has no registry).
// test/a2a/tckConformance.test.ts runs the A2A suite in the test suite.
import { spawn, execFileSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './lib/freePort.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
};
const TCK_DIR = resolve(process.env.AMF_A2A_TCK_DIR ?? join(ROOT, '..', 'shared', 'tools', 'a2a-tck'));
const VENV = join(homedir(), '.cache', 'amf', 'a2a-tck-venv');
const work = mkdtempSync(join(tmpdir(), 'amf-conformance-'));
const children = [];

function start(name, argv, env = {}) {
  // Straight into a file: the suites run synchronously, and a pipe nobody reads meanwhile would
  // fill and stall the mesh.
  const log = openSync(join(work, `${name}.log`), 'a');
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'amf.js'), ...argv], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  children.push(child);
  return child;
}

async function waitFor(what, check, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not up yet
    }
    if (Date.now() > until) throw new Error(`timed out waiting for ${what} (logs in ${work})`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * LOCAL PATCH of the A2A TCK, applied to the scratch copy only (TCK_PATCHES; upstream a2a-tck #202).
 * CORE-SEND-003 quotes the spec ("an unsupported media type MUST result in
 * ContentTypeNotSupportedError") but declares no `expected_error`, so the TCK counts that very error
 * as a failure. The patch is two lines: import the error binding, and expect it. Remove it when
 * upstream fixes the requirement; an anchor that is no longer found stops the run, so a changed TCK
 * is noticed rather than silently tested unpatched.
 */
const TCK_PATCHES = [
  {
    file: 'tck/requirements/core_operations.py',
    why: 'CORE-SEND-003 declares no expected_error (upstream a2a-tck #202)',
    edits: [
      [
        '    TASK_NOT_FOUND_ERROR,\n',
        '    TASK_NOT_FOUND_ERROR,\n    CONTENT_TYPE_NOT_SUPPORTED_ERROR,  # AMF local patch\n',
      ],
      [
        '        expected_behavior="ContentTypeNotSupportedError returned",\n',
        '        expected_behavior="ContentTypeNotSupportedError returned",\n        expected_error=CONTENT_TYPE_NOT_SUPPORTED_ERROR,  # AMF local patch\n',
      ],
    ],
  },
];

function patchTck(dir) {
  for (const patch of TCK_PATCHES) {
    const path = join(dir, patch.file);
    let text = readFileSync(path, 'utf8');
    for (const [anchor, replacement] of patch.edits) {
      if (text.split(anchor).length !== 2)
        throw new Error(
          `TCK patch (${patch.why}): anchor not found once in ${patch.file}; has upstream changed?`,
        );
      text = text.replace(anchor, replacement);
    }
    writeFileSync(path, text);
  }
}

/** The A2A TCK (a2aproject/a2a-tck), run from a scratch copy (patched: TCK_PATCHES) so its reports stay out of it. */
const a2aTck = {
  name: 'A2A TCK',
  /** Why this suite cannot run here, or undefined. */
  missing() {
    return existsSync(join(TCK_DIR, 'run_tck.py')) ? undefined : `no A2A TCK at ${TCK_DIR} (AMF_A2A_TCK_DIR)`;
  },
  prepare() {
    const missing = this.missing();
    if (missing) throw new Error(missing);
    const python = join(VENV, 'bin', 'python');
    if (!existsSync(python)) execFileSync('python3', ['-m', 'venv', VENV], { stdio: 'inherit' });
    const deps = execFileSync(python, [
      '-c',
      "import tomllib,sys;print('\\n'.join(tomllib.load(open(sys.argv[1],'rb'))['project']['dependencies']))",
      join(TCK_DIR, 'pyproject.toml'),
    ]).toString();
    const stamp = join(VENV, 'amf-deps.txt');
    if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== deps) {
      const req = join(work, 'requirements.txt');
      writeFileSync(req, deps);
      execFileSync(python, ['-m', 'pip', 'install', '-q', '-r', req], { stdio: 'inherit' });
      writeFileSync(stamp, deps);
    }
    this.python = python;
  },
  run(target) {
    const dir = join(work, `tck-${target.name}`);
    cpSync(TCK_DIR, dir, { recursive: true });
    chmodSync(dir, 0o755);
    patchTck(dir);
    const level = opt('level');
    const argv = [
      'run_tck.py',
      '--sut-host',
      target.url,
      ...(level ? ['--level', level] : []),
      '--',
      '-p',
      'no:cacheprovider',
    ];
    let out = '';
    try {
      out = execFileSync(this.python, argv, {
        cwd: dir,
        env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
      }).toString();
    } catch (err) {
      out = String(err.stdout ?? '') + String(err.stderr ?? '');
    }
    writeFileSync(join(work, `tck-${target.name}.txt`), out);
    const tests =
      /(\d+ (?:failed|passed|skipped|xfailed|xpassed|errors?)(?:, )?)+ in [\d.]+s/.exec(out)?.[0] ??
      'no summary';
    const count = (kind) => Number(new RegExp(`(\\d+) ${kind}`).exec(tests)?.[1] ?? 0);
    const report = JSON.parse(readFileSync(join(dir, 'reports', 'compatibility.json'), 'utf8'));
    const byLevel = {};
    for (const r of Object.values(report.per_requirement)) {
      const l = (byLevel[r.level] ??= { PASS: 0, FAIL: 0, SKIP: 0 });
      const s = r.status === 'PASS' ? 'PASS' : r.status === 'FAIL' ? 'FAIL' : 'SKIP';
      l[s] += 1;
    }
    const failed = Object.entries(report.per_requirement)
      .filter(([, r]) => r.status === 'FAIL')
      .map(([id, r]) => `${id} (${r.level}): ${(r.errors ?? [])[0] ?? ''}`.slice(0, 200));
    const rows = ['jsonrpc', 'http_json'].map((t) => {
      const p = report.per_transport[t] ?? { passed: 0, failed: 0, skipped: 0 };
      return { transport: t, pass: p.passed, fail: p.failed, skip: p.skipped };
    });
    return {
      tests: {
        pass: count('passed'),
        fail: count('failed'),
        skip: count('skipped'),
        xfail: count('xfailed'),
      },
      byLevel,
      must: report.summary.must_compatibility,
      should: report.summary.should_compatibility,
      rows,
      failed,
    };
  },
};

const SUITES = [a2aTck];

/**
 * Failures that are the suite's own defect, not AMF's, with the reason (docs/a2a.md says more).
 * They are printed, and do not fail the run.
 */
const KNOWN_SUITE_DEFECTS = {
  'CARD-STRUCT-001':
    'by design: /.well-known/agent-card.json is the union of the 1.0 and 0.3 cards (0.3 clients look there, and an unversioned request is 0.3 by A2A 1.0 section 3.6.2), as the official Python SDK serves it; the TCK fetches the card without A2A-Version and checks it against a schema that forbids unknown fields, which section 5.7 says readers SHOULD ignore. With A2A-Version: 1.0 the card is strict and validates against that schema (test/conformance/a2aTck.test.ts)',
};

const isKnown = (line) => Object.keys(KNOWN_SUITE_DEFECTS).some((id) => line.startsWith(`${id} `));

function printTable(results) {
  const lines = [];
  lines.push(
    '| suite | target | tests pass / fail / skip (xfail) | MUST pass / fail / skip | MUST % | SHOULD pass / fail | JSON-RPC pass / fail / skip | HTTP+JSON pass / fail / skip |',
  );
  lines.push('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const { suite, target, r } of results) {
    const m = r.byLevel.MUST ?? { PASS: 0, FAIL: 0, SKIP: 0 };
    const s = r.byLevel.SHOULD ?? { PASS: 0, FAIL: 0, SKIP: 0 };
    const t = (x) => `${x.pass} / ${x.fail} / ${x.skip}`;
    lines.push(
      `| ${suite} | ${target} | ${r.tests.pass} / ${r.tests.fail} / ${r.tests.skip} (${r.tests.xfail}) | ${m.PASS} / ${m.FAIL} / ${m.SKIP} | ${r.must} | ${s.PASS} / ${s.FAIL} | ${t(r.rows[0])} | ${t(r.rows[1])} |`,
    );
  }
  console.log(lines.join('\n'));
  for (const { suite, target, r } of results)
    if (r.failed.length > 0)
      console.log(
        `\n${suite} on ${target}, failed requirements:\n  ${r.failed
          .map((f) => (isKnown(f) ? `${f}\n    known: ${KNOWN_SUITE_DEFECTS[f.split(' ')[0]]}` : f))
          .join('\n  ')}`,
      );
}

async function main() {
  const only = opt('suite');
  const suites = SUITES.filter((s) => !only || s.name.toLowerCase().includes(only.toLowerCase()));
  if (args.includes('--prepare')) {
    for (const s of suites) {
      const missing = s.missing();
      if (missing) console.error(`${s.name}: not prepared: ${missing}`);
      else s.prepare();
    }
    return [];
  }
  for (const s of suites) s.prepare();
  if (!args.includes('--no-build'))
    execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: 'inherit' });
  const [cPort, wPort] = [await freePort(), await freePort()];
  const dataDir = join(work, 'data');
  // The coordinator at default settings but for what a user of a mesh of several agents sets: where
  // a message that names no agent and matches no skill goes.
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(join(dataDir, 'amf.yaml'), 'a2a:\n  default_agent: tck\n');
  const coordinator = `http://127.0.0.1:${cPort}`;
  const worker = `http://127.0.0.1:${wPort}`;
  start('coordinator', [
    'up',
    '--no-mdns',
    '--port',
    String(cPort),
    '--nats-port',
    '0',
    '--data-dir',
    dataDir,
  ]);
  await waitFor('the coordinator', async () => (await fetch(`${coordinator}/health`)).ok);
  start('worker', [
    'worker',
    '--no-mdns',
    '--coordinator',
    coordinator,
    '--data-dir',
    dataDir,
    '--name',
    'tck',
    '--tags',
    'tck',
    '--port',
    String(wPort),
    '--handler',
    join(ROOT, 'test', 'fixtures', 'tckAgent.mjs'),
  ]);
  start('echo', [
    'worker',
    '--no-mdns',
    '--coordinator',
    coordinator,
    '--data-dir',
    dataDir,
    '--name',
    'echo',
    '--tags',
    'echo',
    '--port',
    '0',
    '--handler',
    'echo',
  ]);
  await waitFor('both workers to be live in the mesh', async () => {
    const card = await (await fetch(`${coordinator}/.well-known/agent-card.json`)).json();
    return ['tck', 'echo'].every((id) => card.skills.some((s) => s.id === id));
  });
  const results = [];
  for (const suite of suites)
    for (const target of [
      { name: 'coordinator', url: coordinator },
      { name: 'worker', url: worker },
    ]) {
      console.error(`running ${suite.name} against the ${target.name} (${target.url})...`);
      results.push({ suite: suite.name, target: target.name, r: suite.run(target) });
    }
  printTable(results);
  return results;
}

let code = 0;
try {
  const results = await main();
  // Exit 1 when a MUST failed that is not a known defect of the suite.
  code = results.some((x) => x.r.failed.some((f) => f.includes('(MUST)') && !isKnown(f))) ? 1 : 0;
} catch (err) {
  console.error(String(err?.stack ?? err));
  code = 2;
} finally {
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r() : c.once('exit', r)))));
  if (args.includes('--keep') || code === 2) console.error(`logs and reports: ${work}`);
  else rmSync(work, { recursive: true, force: true });
}
process.exit(code);
