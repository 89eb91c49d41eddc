// Static variables (AFM 7): env (load time, clear errors), file: and secret: (AMF-defined), where each
// may appear, and that a value can never change the front matter's structure.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AfmLoadError, loadAfmFile, parseAfm, secretEnvName } from '../../src/afm/index.js';
import type { AfmDefinition, AfmProblem } from '../../src/afm/index.js';

const BODY = '# Role\n\nYou help.\n\n# Instructions\n\nBe kind.\n';
let dir: string;
let agentDir: string;
let dataDir: string;

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'afm-vars-'));
  agentDir = path.join(dir, 'agent');
  dataDir = path.join(dir, 'data');
  mkdirSync(path.join(agentDir, 'conf'), { recursive: true });
  mkdirSync(path.join(dataDir, 'secrets'), { recursive: true });
  writeFileSync(path.join(agentDir, 'conf', 'base-url.txt'), 'http://127.0.0.1:7001/mcp\n');
  writeFileSync(
    path.join(agentDir, 'conf', 'api.json'),
    JSON.stringify({ api: { baseUrl: 'http://127.0.0.1:7002', port: 7002 } }),
  );
  writeFileSync(
    path.join(agentDir, 'conf', 'api.yaml'),
    'api:\n  baseUrl: http://127.0.0.1:7003\n  list: [1, 2]\n',
  );
  writeFileSync(path.join(agentDir, 'conf', 'big.txt'), 'x'.repeat(64 * 1024 + 1));
  writeFileSync(path.join(dir, 'outside.txt'), 'secret outside');
  symlinkSync(path.join(dir, 'outside.txt'), path.join(agentDir, 'conf', 'link.txt'));
  writeFileSync(path.join(dataDir, 'secrets', 'model-key'), 'sk-from-file\n', { mode: 0o600 });
  writeFileSync(path.join(dataDir, 'secrets', 'loose'), 'visible', { mode: 0o644 });
  chmodSync(path.join(dataDir, 'secrets', 'loose'), 0o644);
  writeFileSync(path.join(dataDir, 'secrets', 'empty'), '', { mode: 0o600 });
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function load(frontMatter: string, env: Record<string, string> = {}, body = BODY) {
  return parseAfm(`---\n${frontMatter}\n---\n${body}`, path.join(agentDir, 'a.afm.md'), {
    resolve: true,
    env,
    dataDir,
  });
}

function loaded(frontMatter: string, env: Record<string, string> = {}, body = BODY): AfmDefinition {
  const result = load(frontMatter, env, body);
  expect(result.problems.filter((p) => p.severity === 'error')).toEqual([]);
  if (!result.definition) throw new Error('no definition');
  return result.definition;
}

const brief = (problems: readonly AfmProblem[]) =>
  problems.map((p) => `${p.line}:${p.column} ${p.severity} ${p.message}`);

describe('env: (spec-defined, load time)', () => {
  it('substitutes ${env:X} inside values, several per value', () => {
    const def = loaded('model:\n  url: "http://${env:HOST}:${env:PORT}/v1"\n  name: "${env:MODEL}"', {
      HOST: '127.0.0.1',
      PORT: '11434',
      MODEL: 'llama3.2',
    });
    expect(def.model).toEqual({ url: 'http://127.0.0.1:11434/v1', name: 'llama3.2' });
  });

  it('reads unprefixed ${X} in the front matter as env (like the reference implementations)', () => {
    expect(loaded('license: "${LICENSE_NAME}"', { LICENSE_NAME: 'MIT' }).license).toBe('MIT');
  });

  it('names the unset variable, with the line and column of the reference', () => {
    const result = load('model:\n  name: m\n  url: "http://${env:HOST}:${env:PORT}/v1"', { HOST: 'h' });
    expect(result.definition).toBeUndefined();
    expect(brief(result.problems)).toEqual(['4:28 error environment variable PORT is not set (${env:PORT})']);
  });

  it('refuses an empty variable', () => {
    expect(brief(load('license: "${env:EMPTY}"', { EMPTY: '' }).problems)).toEqual([
      '2:11 error environment variable EMPTY is set but empty (${env:EMPTY})',
    ]);
  });

  it('throws AfmLoadError with every problem from loadAfmFile', async () => {
    const file = path.join(agentDir, 'unset.afm.md');
    writeFileSync(file, `---\nlicense: "\${env:AFM_NOPE_1}"\nicon_url: "\${env:AFM_NOPE_2}"\n---\n${BODY}`);
    const err = await loadAfmFile(file, { env: {}, dataDir }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AfmLoadError);
    const problems = (err as AfmLoadError).problems;
    expect(brief(problems)).toEqual([
      '2:11 error environment variable AFM_NOPE_1 is not set (${env:AFM_NOPE_1})',
      '3:12 error environment variable AFM_NOPE_2 is not set (${env:AFM_NOPE_2})',
    ]);
    expect((err as AfmLoadError).message).toContain(
      `${file}:2:11: environment variable AFM_NOPE_1 is not set`,
    );
    expect((err as AfmLoadError).code).toBe('INVALID_REQUEST');
  });

  it('never lets a value change the YAML structure', () => {
    const def = loaded('license: "${env:EVIL}"', { EVIL: 'MIT\nmodel:\n  url: http://evil' });
    expect(def.license).toBe('MIT\nmodel:\n  url: http://evil');
    expect(def.model).toEqual({});
  });

  it('checks the substituted URL, not the template', () => {
    expect(brief(load('model:\n  url: "${env:URL}"', { URL: 'not a url' }).problems)).toEqual([
      "3:8 error model url 'not a url' is not an absolute URL",
    ]);
  });

  it('writes a literal ${ for $${ in values', () => {
    expect(loaded('license: "costs $${env:X}"').license).toBe('costs ${env:X}');
  });

  it('resolves env in the webhook prompt and keeps http variables and $${ for the template', () => {
    const def = loaded(
      'interfaces:\n  - type: webhook\n    prompt: "${env:TEAM}: ${http:payload.a} $${http:payload.b}"',
      {
        TEAM: 'ops',
      },
    );
    const hook = def.interfaces[0];
    expect(hook?.type === 'webhook' && hook.prompt).toBe('ops: ${http:payload.a} $${http:payload.b}');
  });

  it('resolves prefixed variables in the body but leaves shell-style ${X} literal', () => {
    const def = loaded(
      'name: b',
      { WHO: 'Ada' },
      '# Role\n\nHelp ${env:WHO} with ${HOME}.\n\n# Instructions\n\nGo.\n',
    );
    expect(def.role).toBe('Help Ada with ${HOME}.');
    const missing = load('name: b', {}, '# Role\n\nHelp ${env:WHO}.\n\n# Instructions\n\nGo.\n');
    expect(brief(missing.problems)).toEqual(['6:6 error environment variable WHO is not set (${env:WHO})']);
  });

  it('validation mode reads nothing: unset variables are notes and values stay as written', () => {
    const result = parseAfm(
      `---\nlicense: "\${env:AFM_UNSET_X}"\nicon_url: "\${secret:nope}"\n---\n${BODY}`,
      path.join(agentDir, 'v.afm.md'),
      { resolve: false, env: {}, dataDir },
    );
    expect(brief(result.problems)).toEqual([
      '2:11 note environment variable AFM_UNSET_X is not set here; it must be set when the agent runs',
    ]);
    expect(result.definition?.license).toBe('${env:AFM_UNSET_X}');
    expect(result.definition?.icon_url).toBe('${secret:nope}');
  });
});

describe('file: (AMF-defined: a file next to the AFM file)', () => {
  it('reads a whole file without its final newline', () => {
    const def = loaded(
      'tools:\n  mcp:\n    - name: a\n      transport:\n        type: http\n        url: "${file:conf/base-url.txt}"',
    );
    const transport = def.tools.mcp[0]?.transport;
    expect(transport?.type === 'http' && transport.url).toBe('http://127.0.0.1:7001/mcp');
  });

  it('reads a key of a JSON or YAML file with #key.path', () => {
    expect(loaded('model:\n  url: "${file:conf/api.json#api.baseUrl}"').model.url).toBe(
      'http://127.0.0.1:7002',
    );
    expect(loaded('license: "${file:conf/api.json#api.port}"').license).toBe('7002');
    expect(loaded('model:\n  url: "${file:conf/api.yaml#api.baseUrl}"').model.url).toBe(
      'http://127.0.0.1:7003',
    );
  });

  it.each([
    ['${file:conf/missing.txt}', /^file 'conf\/missing.txt' not found next to the AFM file/],
    ['${file:../outside.txt}', /^file '..\/outside.txt' is outside the AFM file's directory$/],
    ['${file:conf/link.txt}', /^file 'conf\/link.txt' is outside the AFM file's directory$/],
    ['${file:/etc/hostname}', /^file path '\/etc\/hostname' must be relative to the AFM file's directory$/],
    ['${file:conf/big.txt}', /^file 'conf\/big.txt' is 65537 bytes; the limit is 65536$/],
    ['${file:conf/api.json#api.nope}', /^key 'api.nope' not found in file 'conf\/api.json'$/],
    [
      '${file:conf/api.yaml#api.list}',
      /^key 'api.list' in file 'conf\/api.yaml' is not a string, number or boolean$/,
    ],
    ['${file:conf/base-url.txt#a}', /^file 'conf\/base-url.txt': a #key needs a .json, .yaml or .yml file$/],
    ['${file:}', /^\$\{file:\}: expected a file name after 'file:'$/],
  ])('refuses %s', (ref, message) => {
    const result = load(`license: "${ref}"`);
    expect(result.definition).toBeUndefined();
    expect(result.problems).toHaveLength(1);
    expect(result.problems[0]).toMatchObject({ severity: 'error', line: 2, column: 11 });
    expect(result.problems[0]?.message).toMatch(message);
  });
});

describe('secret: (AMF-defined: AMF_SECRET_<NAME> or <data-dir>/secrets/<name>)', () => {
  it('prefers the AMF_SECRET_ environment variable', () => {
    expect(secretEnvName('model-key')).toBe('AMF_SECRET_MODEL_KEY');
    const def = loaded('model:\n  authentication:\n    type: bearer\n    token: "${secret:model-key}"', {
      AMF_SECRET_MODEL_KEY: 'sk-from-env',
    });
    expect(def.model.authentication?.token).toBe('sk-from-env');
  });

  it('reads a 0600 file under <data-dir>/secrets without its final newline', () => {
    const def = loaded('model:\n  authentication:\n    type: bearer\n    token: "${secret:model-key}"');
    expect(def.model.authentication?.token).toBe('sk-from-file');
  });

  it.each([
    [
      '${secret:missing}',
      /^secret 'missing' not found: set AMF_SECRET_MISSING or write it to .*secrets\/missing \(mode 0600\)$/,
    ],
    [
      '${secret:loose}',
      /^secret file .*secrets\/loose is readable by other users \(mode 644\): chmod 600 it$/,
    ],
    ['${secret:empty}', /^secret file .*secrets\/empty is empty$/],
    ['${secret:../x}', /^secret name '..\/x' must be 1-128 characters/],
  ])('refuses %s', (ref, message) => {
    const result = load(`license: "${ref}"`);
    expect(result.problems).toHaveLength(1);
    expect(result.problems[0]).toMatchObject({ severity: 'error', line: 2, column: 11 });
    expect(result.problems[0]?.message).toMatch(message);
  });
});

describe('prefixes refused where they do not belong', () => {
  it.each([
    [
      'model:\n  url: "${http:payload.url}"',
      '3:9 error ${http:payload.url}: http variables are only allowed in the prompt of a webhook interface',
    ],
    [
      'tools:\n  mcp:\n    - name: a\n      transport:\n        type: stdio\n        command: x\n        args: ["${http:header.X}"]',
      '8:17 error ${http:header.X}: http variables are only allowed in the prompt of a webhook interface',
    ],
    [
      'interfaces:\n  - type: webhook\n    subscription:\n      protocol: websub\n      secret: "${http:header.S}"',
      '6:16 error ${http:header.S}: http variables are only allowed in the prompt of a webhook interface',
    ],
    [
      'license: "${vault:abc}"',
      "2:11 error ${vault:abc}: unsupported variable prefix 'vault:' (use env:, file: or secret:)",
    ],
    ['license: "${env:A-B}"', "2:11 error ${env:A-B}: 'A-B' is not an environment variable name"],
  ])('%s', (frontMatter, expected) => {
    expect(brief(load(frontMatter).problems)).toEqual([expected]);
  });
});
