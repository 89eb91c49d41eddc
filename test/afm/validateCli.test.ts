// `amf validate FILE...` through the built CLI (bin/amf.js → dist/): every problem as
// file:line:col: message, exit 1 on any error, 0 when all files are valid, no env vars needed.
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { validateCommand } from '../../src/cli/validateCommand.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const AMF_BIN = path.join(ROOT, 'bin/amf.js');
const FIXTURES = 'test/fixtures/afm';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function amf(args: string[], env: Record<string, string> = {}): Promise<Run> {
  // A clean environment: the result must not depend on variables of the machine running the tests.
  const base = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' };
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [AMF_BIN, ...args],
      { cwd: ROOT, env: { ...base, ...env }, timeout: 20_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

// The CLI loads its whole module graph at start; on a busy machine that takes seconds.
describe('amf validate (built CLI)', { timeout: 90_000 }, () => {
  it('exits 0 for valid files and prints notes for unset environment variables', async () => {
    const files = ['full.afm.md', 'minimal.afm', 'webhook-triage.afm.md', 'math-tutor.afm.md'].map(
      (f) => `${FIXTURES}/${f}`,
    );
    const run = await amf(['validate', ...files]);
    expect(run.code).toBe(0);
    expect(run.stdout.split('\n')).toEqual([
      `${FIXTURES}/full.afm.md:6:1: note: both 'author' and 'authors' are given: 'authors' takes precedence`,
      `${FIXTURES}/full.afm.md:21:13: note: environment variable AFM_TEST_TOKEN is not set here; it must be set when the agent runs`,
      `${FIXTURES}/full.afm.md:47:16: note: environment variable AFM_TEST_WEBHOOK_SECRET is not set here; it must be set when the agent runs`,
      `${FIXTURES}/full.afm.md: ok`,
      `${FIXTURES}/minimal.afm: ok`,
      `${FIXTURES}/webhook-triage.afm.md: ok`,
      `${FIXTURES}/math-tutor.afm.md:14:15: note: environment variable MATH_MCP_SERVER is not set here; it must be set when the agent runs`,
      `${FIXTURES}/math-tutor.afm.md: ok`,
      '',
    ]);
  });

  it('checks every file, prints every problem with line and column, and exits 1 when any is invalid', async () => {
    const bad = `${FIXTURES}/bad-many.afm.md`;
    const run = await amf([
      'validate',
      `${FIXTURES}/minimal.afm`,
      bad,
      `${FIXTURES}/bad-yaml.afm.md`,
      `${FIXTURES}/bad-sections.afm.md`,
      `${FIXTURES}/does-not-exist.afm.md`,
    ]);
    expect(run.code).toBe(1);
    expect(run.stdout.trimEnd().split('\n')).toEqual([
      `${FIXTURES}/minimal.afm: ok`,
      `${bad}:2:7: name must be a string, not number 42`,
      `${bad}:3:1: unknown key 'colour' in front matter; allowed keys: spec_version, name, description, version, author, authors, provider, icon_url, license, model, interfaces, tools, max_iterations, x-amf`,
      `${bad}:7:5: bearer authentication needs 'token'`,
      `${bad}:8:5: unknown key 'tokn' in bearer authentication; allowed keys: type, token`,
      `${bad}:13:15: interfaces[0].exposure.http.path must be a URL path starting with "/" (no query or fragment), e.g. /chat`,
      `${bad}:14:11: a second 'webchat' interface (the first is interfaces[0]): one interface per type`,
      `${bad}:15:11: interfaces[2].type must be one of consolechat, webchat or webhook, not the string "smoke"`,
      `${bad}:21:14: MCP server url 'not a url' is not an absolute URL`,
      `${bad}:22:13: MCP server name 'srv' is already used by tools.mcp[0]; names must be unique`,
      `${bad}:24:9: tools.mcp[1].transport is missing the required key 'command'`,
      `${bad}:25:17: max_iterations must be >= 1`,
      `${bad}:27:1: missing required '# Instructions' section in the markdown body (AFM 4.3)`,
      `${bad}:30:6: \${http:payload.x}: http variables are only allowed in the prompt of a webhook interface`,
      `${FIXTURES}/bad-yaml.afm.md:4:10: YAML: Missing closing "quote`,
      `${FIXTURES}/bad-sections.afm.md:4:1: missing required '# Role' section in the markdown body (AFM 4.3)`,
      `${FIXTURES}/bad-sections.afm.md:5:1: note: text before the first '# Role' or '# Instructions' section is not part of the agent and is ignored`,
      `${FIXTURES}/does-not-exist.afm.md:1:1: file not found`,
      '4 of 5 files are invalid',
    ]);
  });

  it('needs at least one file', async () => {
    const run = await amf(['validate']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("missing required argument 'files'");
  });
});

describe('validateCommand (in process)', () => {
  it('returns 0 for a valid file, without a note when the variable is set', async () => {
    const out: string[] = [];
    const sink = { write: (s: string) => void out.push(s) };
    const code = await validateCommand([`${FIXTURES}/math-tutor.afm.md`], sink, {
      MATH_MCP_SERVER: 'http://127.0.0.1:1/mcp',
    });
    expect(code).toBe(0);
    expect(out).toEqual([`${FIXTURES}/math-tutor.afm.md: ok\n`]);
  });

  it('returns 1 for a file with the wrong extension', async () => {
    const out: string[] = [];
    const code = await validateCommand(['README.md'], { write: (s: string) => void out.push(s) }, {});
    expect(code).toBe(1);
    expect(out[0]).toBe('README.md:1:1: an AFM file must be named *.afm.md or *.afm (AFM 3)\n');
  });
});
