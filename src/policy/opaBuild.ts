/**
 * What a policy directory's sources are, their checksum manifest, and compiling them into a wasm
 * bundle with the `opa` binary. Shared by `--policy DIR` and the drift test; scripts/build-policy.sh
 * does the same in bash (same file selection, same manifest format).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { access, copyFile, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, resolve, sep } from 'node:path';
import { promisify } from 'node:util';
import { AmfError } from '../errors.js';
import { ADMISSION_ENTRYPOINT, DELEGATION_ENTRYPOINT, MCP_ENTRYPOINT } from './decisions.js';

const run = promisify(execFile);

/** The OPA version the project builds and tests with. */
export const OPA_VERSION = 'v1.10.1';

/**
 * The policy source files of a directory, relative paths with `/`, sorted bytewise: every `*.rego`
 * except `*_test.rego`, and every `data.json`, in any subdirectory (hidden ones skipped).
 */
export async function listPolicySources(dir: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (current: string): Promise<void> => {
    for (const entry of await readdir(current, { withFileTypes: true })) {
      if (entry.name.startsWith('.')) continue;
      const full = join(current, entry.name);
      if (entry.isDirectory()) await walk(full);
      else if (
        entry.isFile() &&
        ((entry.name.endsWith('.rego') && !entry.name.endsWith('_test.rego')) || entry.name === 'data.json')
      )
        found.push(relative(dir, full).split(sep).join('/'));
    }
  };
  await walk(dir);
  return found.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
}

/**
 * The checksum manifest of a directory's policy sources, in `sha256sum` format (`<hex>  <path>\n`
 * per file, sorted). `policy-bundle/bundle.sources.sha256` holds it for the committed bundle, so
 * `cd policies && sha256sum -c ../policy-bundle/bundle.sources.sha256` also checks it.
 */
export async function policySourcesManifest(dir: string): Promise<string> {
  const lines: string[] = [];
  for (const file of await listPolicySources(dir)) {
    const hash = createHash('sha256')
      .update(await readFile(join(dir, file)))
      .digest('hex');
    lines.push(`${hash}  ${file}\n`);
  }
  return lines.join('');
}

/** The bundle revision written into `.manifest`: sha256 of the sources manifest text. */
export function manifestRevision(manifest: string): string {
  return createHash('sha256').update(manifest).digest('hex');
}

async function isExecutable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Finds the `opa` binary: `$AMF_OPA_BIN`, then `opa` on PATH, then `$GOPATH/bin`, `~/go/bin` and
 * `~/.local/bin`. Null when there is none.
 */
export async function findOpaBinary(env: NodeJS.ProcessEnv = process.env): Promise<string | null> {
  if (env.AMF_OPA_BIN) return (await isExecutable(env.AMF_OPA_BIN)) ? env.AMF_OPA_BIN : null;
  const candidates = (env.PATH ?? '')
    .split(delimiter)
    .filter(Boolean)
    .map((d) => join(d, 'opa'));
  if (env.GOPATH) candidates.push(join(env.GOPATH, 'bin', 'opa'));
  candidates.push(join(homedir(), 'go', 'bin', 'opa'), join(homedir(), '.local', 'bin', 'opa'));
  for (const candidate of candidates) if (await isExecutable(candidate)) return candidate;
  return null;
}

/** Message for a missing `opa` binary, saying how to get one. */
export function opaMissingMessage(what: string): string {
  return (
    `${what} needs the opa binary, which was not found ($AMF_OPA_BIN, PATH, $GOPATH/bin, ~/go/bin, ~/.local/bin). ` +
    `Install it with \`go install github.com/open-policy-agent/opa@${OPA_VERSION}\`, ` +
    `or use a wasm bundle built by \`npm run build:policy\` (the default policies/bundle.tar.gz needs no opa).`
  );
}

/**
 * Compiles a directory of Rego sources (see listPolicySources) into a wasm bundle at `outFile`
 * with entrypoints amf/admission/decision, amf/delegation/decision and amf/mcp/decision. Only the source files are
 * compiled (tests and stray files are left out); the bundle revision is the sources' checksum.
 * Returns that revision.
 */
export async function buildWasmBundle(dir: string, outFile: string, opaBinary?: string): Promise<string> {
  const opa = opaBinary ?? (await findOpaBinary());
  if (!opa) throw new AmfError('UNAVAILABLE', opaMissingMessage(`compiling the Rego policy in ${dir}`));
  const sources = await listPolicySources(dir);
  if (!sources.some((f) => f.endsWith('.rego')))
    throw new AmfError('INVALID_REQUEST', `policy directory ${dir} holds no .rego file`);
  const stage = await mkdtemp(join(tmpdir(), 'amf-policy-src-'));
  try {
    for (const file of sources) {
      await mkdir(dirname(join(stage, file)), { recursive: true });
      await copyFile(join(dir, file), join(stage, file));
    }
    const revision = manifestRevision(await policySourcesManifest(stage));
    const args = [
      'build',
      '-t',
      'wasm',
      '-e',
      ADMISSION_ENTRYPOINT,
      '-e',
      DELEGATION_ENTRYPOINT,
      '-e',
      MCP_ENTRYPOINT,
    ];
    // Run inside the staging directory so bundle paths read /admission.rego, not /tmp/...
    args.push('--revision', revision, '-o', resolve(outFile), '.');
    try {
      await run(opa, args, { cwd: stage, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 });
    } catch (err) {
      const e = err as { stderr?: string; message?: string };
      const detail = (e.stderr || e.message || String(err)).trim().split(stage).join(dir);
      throw new AmfError('INVALID_REQUEST', `opa build failed for ${dir}: ${detail}`);
    }
    return revision;
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
}
