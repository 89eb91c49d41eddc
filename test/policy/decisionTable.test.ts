/**
 * One decision table, four evaluators of the same Rego: the committed wasm bundle (opa-wasm),
 * `opa eval` with the binary, a real `opa run --server` through opaHttpEngine, and `--policy DIR`
 * compiled at startup. All must agree with each other and with the table.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AmfError } from '../../src/errors.js';
import { createPolicyEngine } from '../../src/policy/index.js';
import { findOpaBinary } from '../../src/policy/opaBuild.js';
import { connectOpaServer } from '../../src/policy/opaHttpEngine.js';
import {
  DEFAULT_BUNDLE_PATH,
  loadPolicyPath,
  loadWasmBundle,
  loadWasmPolicy,
} from '../../src/policy/opaWasmEngine.js';
import type { PolicyEngine } from '../../src/policy/policyEngine.js';
import { OPA_BINARY, opaEval, POLICIES_DIR, startOpaServer, type OpaServer } from './opaFixture.js';
import { freePort } from '../../scripts/lib/freePort.mjs';
import { ADMISSION_CASES, DELEGATION_CASES, MCP_CASES, admissionInput } from './policyCases.js';

const NO_OPA = 'the opa binary is absent (install: go install github.com/open-policy-agent/opa@v1.10.1)';
const EXPECTED_DATA = {
  thresholds: { local: 0.7, mesh: 0.3, public: 0.1 },
  default_threshold: 0.5,
  max_delegation_depth: 5,
  protocol_allowlist: [
    'A2A/1.0',
    'A2A/0.3',
    'MCP/2024-11-05',
    'MCP/2025-03-26',
    'MCP/2025-06-18',
    'MCP/2025-11-25',
    'AMP/1.0',
  ],
};

it('the table is big enough', () => {
  expect(ADMISSION_CASES.length).toBeGreaterThanOrEqual(20);
  expect(DELEGATION_CASES.length).toBeGreaterThanOrEqual(6);
  expect(new Set([...ADMISSION_CASES, ...DELEGATION_CASES].map((c) => c.name)).size).toBe(
    ADMISSION_CASES.length + DELEGATION_CASES.length,
  );
});

async function checkEngine(engine: PolicyEngine): Promise<void> {
  for (const c of ADMISSION_CASES)
    expect(await engine.admission(c.input), `admission: ${c.name}`).toEqual(c.expected);
  for (const c of DELEGATION_CASES)
    expect(await engine.delegation(c.input), `delegation: ${c.name}`).toEqual(c.expected);
  for (const c of MCP_CASES) expect(await engine.mcp(c.input), c.name).toEqual(c.expected);
  expect(await engine.data()).toEqual(EXPECTED_DATA);
}

describe('(a) committed wasm bundle through @open-policy-agent/opa-wasm', () => {
  it('answers the table', async () => {
    const engine = await createPolicyEngine({});
    expect(engine.kind).toBe('opa-wasm');
    expect(engine.detail).toContain(DEFAULT_BUNDLE_PATH);
    await checkEngine(engine);
    await engine.close();
  });

  it('loadWasmPolicy(path) and --policy path.tar.gz load the same bundle', async () => {
    const byPath = await loadPolicyPath(DEFAULT_BUNDLE_PATH);
    expect(byPath.revision).toMatch(/^[0-9a-f]{64}$/);
    expect((await loadWasmPolicy()).revision).toBe(byPath.revision);
  });

  it('refuses a corrupt or incomplete bundle with a clear message', async () => {
    await expect(
      loadWasmBundle(Buffer.from('not a tarball at all, just some bytes'.repeat(20)), 'x.tar.gz'),
    ).rejects.toThrow(/x\.tar\.gz .*build:policy/);
    await expect(loadWasmPolicy('/nonexistent/bundle.tar.gz')).rejects.toThrow(/cannot read policy bundle/);
    await expect(createPolicyEngine({ policyPath: '/nonexistent/dir' })).rejects.toThrow(
      /--policy \/nonexistent\/dir/,
    );
    await expect(
      createPolicyEngine({ opaUrl: 'http://127.0.0.1:1', policyPath: POLICIES_DIR }),
    ).rejects.toThrow(/exclusive/);
  });
});

describe.skipIf(!OPA_BINARY)(
  `(b) opa eval with the binary${OPA_BINARY ? '' : ` — SKIPPED: ${NO_OPA}`}`,
  () => {
    it('answers the table', async () => {
      const admission = await Promise.all(
        ADMISSION_CASES.map((c) => opaEval('data.amf.admission.decision', c.input)),
      );
      ADMISSION_CASES.forEach((c, i) => expect(admission[i], `admission: ${c.name}`).toEqual(c.expected));
      const delegation = await Promise.all(
        DELEGATION_CASES.map((c) => opaEval('data.amf.delegation.decision', c.input)),
      );
      DELEGATION_CASES.forEach((c, i) => expect(delegation[i], `delegation: ${c.name}`).toEqual(c.expected));
      const mcp = await Promise.all(MCP_CASES.map((c) => opaEval('data.amf.mcp.decision', c.input)));
      MCP_CASES.forEach((c, i) => expect(mcp[i], c.name).toEqual(c.expected));
    });
  },
);

describe.skipIf(!OPA_BINARY)(
  `(c) opa run --server through opaHttpEngine${OPA_BINARY ? '' : ` — SKIPPED: ${NO_OPA}`}`,
  () => {
    let server: OpaServer;
    beforeAll(async () => {
      server = await startOpaServer();
    });
    afterAll(async () => {
      await server?.close();
    });

    it('answers the table', async () => {
      const engine = await createPolicyEngine({ opaUrl: `${server.url}/` });
      expect(engine.kind).toBe('opa-http');
      expect(engine.detail).toBe(server.url);
      await checkEngine(engine);
      await engine.close();
    });

    it('explains a server without the AMF policy', async () => {
      const empty = await startOpaServer([]);
      try {
        await expect(connectOpaServer(empty.url)).rejects.toThrow(/no data\.policy .*opa run --server/);
      } finally {
        await empty.close();
      }
    });
  },
);

describe.skipIf(!OPA_BINARY)(
  `(d) --policy DIR compiled with opa at startup${OPA_BINARY ? '' : ` — SKIPPED: ${NO_OPA}`}`,
  () => {
    it('answers the table', async () => {
      const engine = await createPolicyEngine({ policyPath: POLICIES_DIR });
      expect(engine.detail).toMatch(/compiled by opa/);
      await checkEngine(engine);
    });

    it('reports Rego compile errors', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'amf-bad-rego-'));
      try {
        await writeFile(join(dir, 'bad.rego'), 'package amf.admission\n\ndecision := {\n');
        await expect(loadPolicyPath(dir)).rejects.toThrow(/opa build failed/);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  },
);

describe('errors without opa or without a server', () => {
  it('a Rego directory without the opa binary fails with install instructions', async () => {
    const saved = process.env.AMF_OPA_BIN;
    process.env.AMF_OPA_BIN = '/nonexistent/opa';
    try {
      expect(await findOpaBinary()).toBeNull();
      const err = await loadPolicyPath(POLICIES_DIR).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AmfError);
      expect((err as AmfError).code).toBe('UNAVAILABLE');
      expect((err as Error).message).toMatch(
        /opa binary, which was not found.*go install github\.com\/open-policy-agent\/opa@v1\.10\.1/,
      );
    } finally {
      if (saved === undefined) delete process.env.AMF_OPA_BIN;
      else process.env.AMF_OPA_BIN = saved;
    }
  });

  it('an unreachable OPA server is UNAVAILABLE with the command to start one', async () => {
    const port = await freePort();
    const err = await connectOpaServer(`http://127.0.0.1:${port}`).catch((e: unknown) => e);
    expect((err as AmfError).code).toBe('UNAVAILABLE');
    expect((err as Error).message).toMatch(/cannot reach OPA server .*opa run --server/);
    await expect(connectOpaServer('not a url')).rejects.toThrow(/not a URL/);
  });

  it('a server that does not answer times out', async () => {
    const silent: Server = createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const { port } = silent.address() as { port: number };
    try {
      const err = await connectOpaServer(`http://127.0.0.1:${port}`, { timeoutMs: 300 }).catch(
        (e: unknown) => e,
      );
      expect((err as AmfError).code).toBe('TIMEOUT');
      expect((err as Error).message).toMatch(/did not answer .* within 300 ms/);
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((r) => silent.close(() => r()));
    }
  });

  it('input helper produces a valid allowed baseline', async () => {
    const engine = await loadWasmPolicy();
    expect((await engine.admission(admissionInput())).allow).toBe(true);
  });
});
