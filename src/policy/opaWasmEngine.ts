/**
 * In-process policy evaluation: the wasm module that `opa build -t wasm` compiled from
 * `policies/*.rego`, run by `@open-policy-agent/opa-wasm`, with the bundle's data.json as `data`.
 */
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadPolicy, type LoadedPolicy } from '@open-policy-agent/opa-wasm';
import { AmfError } from '../errors.js';
import {
  ADMISSION_ENTRYPOINT,
  DELEGATION_ENTRYPOINT,
  MCP_ENTRYPOINT,
  parseAdmissionDecision,
  parseDelegationDecision,
  parseMcpDecision,
  parsePolicyData,
} from './decisions.js';
import { buildWasmBundle } from './opaBuild.js';
import type {
  AdmissionInput,
  DelegationInput,
  McpCallInput,
  PolicyData,
  PolicyEngine,
} from './policyEngine.js';
import { readTarGz } from './tarGz.js';

/**
 * The committed bundle, resolved from this module (same relative place from src/ and dist/). It is
 * kept outside policies/ because OPA loads any *.tar.gz inside a directory given to it.
 */
export const DEFAULT_BUNDLE_PATH = fileURLToPath(
  new URL('../../policy-bundle/bundle.tar.gz', import.meta.url),
);

/** A wasm policy engine, with the bundle's revision (`.manifest`) when it has one. */
export interface WasmPolicyEngine extends PolicyEngine {
  readonly kind: 'opa-wasm';
  /** The bundle revision: the sha256 of its sources manifest when built by this project. */
  readonly revision: string | null;
}

function bundleError(source: string, problem: string): AmfError {
  return new AmfError(
    'INVALID_REQUEST',
    `policy bundle ${source} ${problem}; rebuild it with \`npm run build:policy\` (opa build -t wasm)`,
  );
}

/**
 * Loads a wasm policy bundle from memory (`.tar.gz` as written by `opa build -t wasm`): its
 * `/policy.wasm`, `/data.json` and `/.manifest`. `source` names it in messages and `detail`.
 */
export async function loadWasmBundle(archive: Buffer, source: string): Promise<WasmPolicyEngine> {
  let files: Map<string, Buffer>;
  try {
    files = readTarGz(archive);
  } catch (err) {
    throw bundleError(source, `is not a readable .tar.gz (${(err as Error).message})`);
  }
  const wasm = files.get('policy.wasm');
  if (!wasm) throw bundleError(source, 'has no /policy.wasm (was it built with -t wasm?)');
  const dataText = files.get('data.json');
  if (!dataText) throw bundleError(source, 'has no /data.json');
  let data: unknown;
  let revision: string | null = null;
  try {
    data = JSON.parse(dataText.toString('utf8'));
    const manifest = files.get('.manifest');
    if (manifest) {
      const parsed = JSON.parse(manifest.toString('utf8')) as { revision?: unknown };
      if (typeof parsed.revision === 'string' && parsed.revision !== '') revision = parsed.revision;
    }
  } catch (err) {
    throw bundleError(source, `holds invalid JSON (${(err as Error).message})`);
  }
  const policyData = parsePolicyData((data as { policy?: unknown } | null)?.policy);

  let policy: LoadedPolicy;
  try {
    policy = await loadPolicy(wasm);
  } catch (err) {
    throw bundleError(source, `has a wasm module opa-wasm cannot load (${(err as Error).message})`);
  }
  const entrypoints = (policy.entrypoints ?? {}) as Record<string, number>;
  for (const entrypoint of [ADMISSION_ENTRYPOINT, DELEGATION_ENTRYPOINT, MCP_ENTRYPOINT])
    if (!(entrypoint in entrypoints)) throw bundleError(source, `lacks the entrypoint ${entrypoint}`);
  policy.setData(data as object);

  const evaluate = (entrypoint: string, input: unknown): unknown => {
    const resultSet = policy.evaluate(input, entrypoint) as Array<{ result?: unknown }> | undefined;
    const first = resultSet?.[0];
    if (!first || first.result === undefined)
      throw new AmfError('INTERNAL', `policy ${source}: ${entrypoint} is undefined for this input`);
    return first.result;
  };

  return {
    kind: 'opa-wasm',
    detail: revision ? `${source} (revision ${revision.slice(0, 12)})` : source,
    revision,
    admission: (input: AdmissionInput) =>
      Promise.resolve().then(() => parseAdmissionDecision(evaluate(ADMISSION_ENTRYPOINT, input))),
    delegation: (input: DelegationInput) =>
      Promise.resolve().then(() => parseDelegationDecision(evaluate(DELEGATION_ENTRYPOINT, input))),
    mcp: (input: McpCallInput) =>
      Promise.resolve().then(() => parseMcpDecision(evaluate(MCP_ENTRYPOINT, input))),
    data: (): Promise<PolicyData> => Promise.resolve(structuredClone(policyData)),
    close: () => Promise.resolve(),
  };
}

/** Loads a wasm policy bundle file; by default the committed `policies/bundle.tar.gz`. */
export async function loadWasmPolicy(bundlePath: string = DEFAULT_BUNDLE_PATH): Promise<WasmPolicyEngine> {
  let archive: Buffer;
  try {
    archive = await readFile(bundlePath);
  } catch (err) {
    throw new AmfError(
      'INVALID_REQUEST',
      `cannot read policy bundle ${bundlePath}: ${(err as Error).message}` +
        (bundlePath === DEFAULT_BUNDLE_PATH ? ' (build it with `npm run build:policy`)' : ''),
    );
  }
  return loadWasmBundle(archive, bundlePath);
}

/**
 * `--policy PATH`: a wasm bundle (`.tar.gz`) is loaded as is; a directory of `.rego` files (plus
 * data.json) is compiled with the `opa` binary into a temporary bundle first (a clear error when
 * opa is missing). The temporary bundle is deleted once loaded.
 */
export async function loadPolicyPath(path: string, opaBinary?: string): Promise<WasmPolicyEngine> {
  const full = resolve(path);
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(full)).isDirectory();
  } catch (err) {
    throw new AmfError('INVALID_REQUEST', `--policy ${path}: ${(err as Error).message}`, undefined, {
      cause: err,
    });
  }
  if (!isDirectory) return loadWasmPolicy(full);
  const out = await mkdtemp(join(tmpdir(), 'amf-policy-bundle-'));
  try {
    const bundle = join(out, 'bundle.tar.gz');
    await buildWasmBundle(full, bundle, opaBinary);
    const engine = await loadWasmBundle(await readFile(bundle), full);
    return {
      ...engine,
      detail: `${full} (compiled by opa, revision ${engine.revision?.slice(0, 12) ?? '?'})`,
    };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}
