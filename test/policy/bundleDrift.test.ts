/**
 * The committed wasm bundle must match the Rego sources: the checksum manifest
 * (policy-bundle/bundle.sources.sha256) is compared without opa; with opa, a fresh build from the
 * current sources must decide the whole decision table exactly like the committed bundle.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildWasmBundle, manifestRevision, policySourcesManifest } from '../../src/policy/opaBuild.js';
import { DEFAULT_BUNDLE_PATH, loadWasmPolicy } from '../../src/policy/opaWasmEngine.js';
import { OPA_BINARY, POLICIES_DIR } from './opaFixture.js';
import { ADMISSION_CASES, DELEGATION_CASES, MCP_CASES } from './policyCases.js';

const SHA_FILE = fileURLToPath(new URL('../../policy-bundle/bundle.sources.sha256', import.meta.url));
const REBUILD = 'the bundle is stale: run `npm run build:policy` and commit policy-bundle/';

describe('committed bundle vs policy sources', () => {
  it('bundle.sources.sha256 matches the current sources', async () => {
    const committed = await readFile(SHA_FILE, 'utf8');
    expect(await policySourcesManifest(POLICIES_DIR), REBUILD).toBe(committed);
    expect(committed).toMatch(/ {2}admission\.rego\n/);
    expect(committed).toMatch(/ {2}data\.json\n/);
    expect(committed).not.toMatch(/_test\.rego/);
  });

  it('the bundle revision is the checksum of that manifest', async () => {
    const engine = await loadWasmPolicy(DEFAULT_BUNDLE_PATH);
    expect(engine.revision, REBUILD).toBe(manifestRevision(await readFile(SHA_FILE, 'utf8')));
  });

  it.skipIf(!OPA_BINARY)(
    `a bundle rebuilt from the sources decides like the committed one${OPA_BINARY ? '' : ' — SKIPPED: the opa binary is absent'}`,
    async () => {
      const out = await mkdtemp(join(tmpdir(), 'amf-bundle-drift-'));
      try {
        const bundle = join(out, 'bundle.tar.gz');
        const revision = await buildWasmBundle(POLICIES_DIR, bundle, OPA_BINARY ?? undefined);
        const fresh = await loadWasmPolicy(bundle);
        const committed = await loadWasmPolicy();
        for (const c of ADMISSION_CASES) {
          const got = await fresh.admission(c.input);
          expect(got, `${REBUILD} (admission: ${c.name})`).toEqual(await committed.admission(c.input));
          expect(got, c.name).toEqual(c.expected);
        }
        for (const c of DELEGATION_CASES) {
          const got = await fresh.delegation(c.input);
          expect(got, `${REBUILD} (delegation: ${c.name})`).toEqual(await committed.delegation(c.input));
          expect(got, c.name).toEqual(c.expected);
        }
        for (const c of MCP_CASES) {
          const got = await fresh.mcp(c.input);
          expect(got, `${REBUILD} (${c.name})`).toEqual(await committed.mcp(c.input));
          expect(got, c.name).toEqual(c.expected);
        }
        expect(await fresh.data()).toEqual(await committed.data());
        expect(fresh.revision).toBe(revision);
        expect(committed.revision, REBUILD).toBe(revision);
      } finally {
        await rm(out, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
