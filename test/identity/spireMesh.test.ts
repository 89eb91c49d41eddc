// SPIFFE in the running mesh, against real SPIRE: a coordinator and a worker process attested by
// the unix workload attestor as two workloads (same uid, different gid), each with its own entry.
// Proves: admission at `mesh` visibility through the SVID proof (and its refusal for an impostor);
// the worker's edge refuses calls without a bearer, with a wrong-audience or an expired JWT-SVID.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEvent, type EventSender } from '../../src/events/cloudEvent.js';
import type { AgentRecord } from '../../src/events/agentRecord.js';
import { EventBus } from '../../src/fabric/eventBus.js';
import { WorkloadApiClient } from '../../src/identity/workloadApiClient.js';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RemoteA2aAgent } from '../../src/a2aClient/remoteAgent.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { startTestMesh, type ObservedEvent, type TestMesh } from '../helpers/meshFixture.js';
import { startTestNats, type TestNats } from '../helpers/natsFixture.js';
import { AdmissionPipeline, type AdmissionOutcome } from '../../src/admission/admissionPipeline.js';
import { agentRecordToTxt } from '../../src/discovery/txtRecord.js';
import type { RawAdvertisement } from '../../src/discovery/advertisement.js';
import { SUBJECT_INTERNAL_CLASSIFIED, SUBJECT_INTERNAL_RAW } from '../../src/events/subjects.js';
import { SpiffeIdentity } from '../../src/identity/spiffeIdentity.js';
import { VouchedSigner } from '../../src/identity/vouchedSigner.js';
import { createPolicyEngine } from '../../src/policy/index.js';
import type { PolicyEngine } from '../../src/policy/policyEngine.js';
import { AgentRegistry } from '../../src/registry/agentRegistry.js';
import { PolicyNotices } from '../../src/registry/policyNotices.js';
import { createSummarySealer } from '../../src/watcher/summarySigning.js';
import { failClosedSummary } from '../../src/watcher/watcherService.js';
import type { WatcherSummary } from '../../src/watcher/watcherSummary.js';
import { startTestSpire, TRUST_DOMAIN, type TestSpire } from './spireFixture.js';

const ROOT = resolve(import.meta.dirname, '../..');
const COORDINATOR = `spiffe://${TRUST_DOMAIN}/coordinator`;
const SHORT_LIVED = `spiffe://${TRUST_DOMAIN}/short-lived`;
const WORKER_NAME = 'spiffe-echo';
const WORKER = `spiffe://${TRUST_DOMAIN}/worker/${WORKER_NAME}`;
/** The worker process runs with this primary group, which is what tells SPIRE it apart. */
const WORKER_GID = 4242;
const uid = process.getuid!();
const gid = process.getgid!();

const payloadOf = (e: ObservedEvent) =>
  e.event.data.payload as { reason?: string; agent_id?: string; details?: { reasons?: string[] } };

describe('SPIFFE mesh with real SPIRE', () => {
  let spire: TestSpire;
  let mesh: TestMesh;
  let worker: ChildProcess | undefined;
  let workerUrl: string;
  let workload: WorkloadApiClient;
  const workerOutput: string[] = [];

  beforeAll(async () => {
    if (!existsSync(join(ROOT, 'dist/cli/main.js')))
      throw new Error('dist/ is missing: run `npx tsc -p tsconfig.json` (scripts/test.sh builds first)');
    spire = await startTestSpire();
    await spire.register({ spiffeId: COORDINATOR, selectors: [`unix:uid:${uid}`, `unix:gid:${gid}`] });
    // A second identity of the test process whose JWT-SVIDs live one second (the expiry proof).
    await spire.register({
      spiffeId: SHORT_LIVED,
      selectors: [`unix:uid:${uid}`, `unix:gid:${gid}`],
      jwtSvidTtlSeconds: 1,
    });
    await spire.register({ spiffeId: WORKER, selectors: [`unix:uid:${uid}`, `unix:gid:${WORKER_GID}`] });
    // The agent learns new entries on its next sync (every few seconds, slower on a loaded machine),
    // and the coordinator gives its Workload API 10 s: wait (up to a minute) until the agent serves
    // the coordinator's SVID before starting it.
    for (const deadline = Date.now() + 60_000; ;) {
      try {
        await (await SpiffeIdentity.open({ socket: spire.socket, spiffeId: COORDINATOR })).close();
        break;
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
    mesh = await startTestMesh({
      config: { identity: { mode: 'spiffe', trustDomain: TRUST_DOMAIN } } as never,
      env: { SPIFFE_ENDPOINT_SOCKET: spire.socket, AMF_SPIFFE_ID: COORDINATOR },
    });
    worker = spawn(
      process.execPath,
      [
        join(ROOT, 'bin/amf.js'),
        'worker',
        '--name',
        WORKER_NAME,
        '--tags',
        'echo',
        '--handler',
        'echo',
        '--port',
        '0',
        '--no-mdns',
      ],
      {
        gid: WORKER_GID,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          PATH: process.env.PATH,
          HOME: mesh.config.dataDir,
          AMF_DATA_DIR: mesh.config.dataDir,
          AMF_NATS_URL: mesh.coordinator.natsUrl,
          AMF_IDENTITY_MODE: 'spiffe',
          SPIFFE_ENDPOINT_SOCKET: spire.socket,
          AMF_LOG_LEVEL: 'warn',
        },
      },
    );
    worker.stdout!.on('data', (b: Buffer) => workerOutput.push(b.toString()));
    worker.stderr!.on('data', (b: Buffer) => workerOutput.push(b.toString()));
    workerUrl = await mesh.waitFor(
      () => /serving echo at (\S+)/.exec(workerOutput.join(''))?.[1],
      90_000,
      `worker start (${workerOutput.join('')})`,
    );
    workload = new WorkloadApiClient(spire.socket);
  }, 240_000);

  afterAll(async () => {
    workload?.close();
    if (worker && worker.exitCode === null) {
      const exited = new Promise((r) => worker!.once('exit', r));
      worker.kill('SIGTERM');
      await exited;
    }
    await mesh?.close();
    await spire?.close();
  });

  const jwtFor = async (audience: string, as = COORDINATOR) =>
    (await workload.fetchJwtSvid([audience], as)).svids[0]!.svid;

  const send = (token: string | undefined) =>
    fetch(`${workerUrl}/tasks/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ text: 'hello' }),
    });

  it('admits the SPIRE-attested worker at mesh visibility after it proves its SVID', async () => {
    await mesh.waitFor(() => mesh.coordinator.registry.isLive(WORKER), 60_000, 'worker admitted');
    const entry = mesh.coordinator.registry.get(WORKER)!;
    expect(entry.record.visibility).toBe('mesh');
    expect(entry.record.trust_domain).toBe(TRUST_DOMAIN);
    expect(mesh.coordinator.identity).toMatchObject({ mode: 'spiffe', agentId: COORDINATOR });
    // Its watcher summary was signed and verified: no integrity warning under SPIFFE.
    expect(
      mesh.events.some(
        (e) => payloadOf(e).reason === 'watcher_output_unverified' && payloadOf(e).agent_id === WORKER,
      ),
    ).toBe(false);
  });

  it('denies a mesh advertisement whose endpoint cannot prove the advertised SVID', async () => {
    const impostor = `spiffe://${TRUST_DOMAIN}/worker/impostor`;
    const bus = new EventBus(await mesh.connect('specialist', 'impostor'));
    const record: AgentRecord = {
      agent_id: impostor,
      endpoint: workerUrl,
      protocols_supported: ['A2A/1.0'],
      capability_tags: ['echo'],
      trust_domain: TRUST_DOMAIN,
      visibility: 'mesh',
      heartbeat_seconds: 5,
    };
    const sender: EventSender = {
      identity: impostor,
      source: 'urn:test',
      role: 'specialist',
      trustDomain: TRUST_DOMAIN,
    };
    bus.publish(createEvent({ type: 'amf.discovery.agent.heartbeat', sender, payload: record }));
    const deny = await mesh.waitForEvent(
      (e) => e.subject === 'amf.policy.deny' && payloadOf(e).agent_id === impostor,
      20_000,
      'deny of the impostor',
    );
    expect(payloadOf(deny).details?.reasons).toContain('visibility_requires_svid');
    const warning = await mesh.waitForEvent(
      (e) => e.subject === 'amf.policy.warning' && payloadOf(e).agent_id === impostor,
      5_000,
      'proof warning',
    );
    // The coordinator's bearer named the impostor as audience, so the real worker behind that
    // endpoint refused to answer (401): no SVID for the advertised id, no mesh admission.
    expect(payloadOf(warning).reason).toBe('svid_proof_failed');
    expect((warning.event.data.payload as { message: string }).message).toMatch(/HTTP 401/);
    expect(mesh.coordinator.registry.get(impostor)).toBeUndefined();
  });

  it('the worker accepts a JWT-SVID for its own SPIFFE ID and refuses no bearer or a wrong audience', async () => {
    const ok = await send(await jwtFor(WORKER));
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ status: 'completed', agent_id: WORKER });

    const none = await send(undefined);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(await none.json()).toMatchObject({ error: { reason: 'missing_bearer' } });

    const wrong = await send(await jwtFor(`spiffe://${TRUST_DOMAIN}/someone-else`));
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({ error: { reason: 'wrong_audience' } });
    // Discovery stays open: the card is how a caller learns whom to ask a token for.
    expect((await fetch(`${workerUrl}/.well-known/agent-card.json`)).status).toBe(200);
  });

  it('the coordinator presents its JWT-SVID on MCP calls: a federated tool call reaches the gated worker', async () => {
    await mesh.waitFor(() => mesh.coordinator.registry.isLive(WORKER), 60_000, 'worker admitted');
    const client = new Client({ name: 'amf-spiffe-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${mesh.url}/mcp`)));
    try {
      const name = await mesh.waitFor(
        async () =>
          (await client.listTools()).tools.find((t) => t.description?.includes(`[${WORKER}/echo]`))?.name,
        30_000,
        'federated echo tool',
      );
      const result = (await client.callTool({
        name,
        arguments: { text: 'through the bearer' },
      })) as CallToolResult;
      expect(result.isError).toBeFalsy();
      expect(JSON.stringify(result.content)).toContain('through the bearer');
      // No plaintext-call warning: the SPIFFE tier authenticated the call.
      expect(
        mesh.events.some(
          (e) => payloadOf(e).reason === 'mcp_call_unauthenticated' && payloadOf(e).agent_id === WORKER,
        ),
      ).toBe(false);
    } finally {
      await client.close();
    }
  });

  it('the coordinator presents a proven JWT-SVID on its A2A calls; without one the worker refuses them', async () => {
    await mesh.waitFor(() => mesh.coordinator.registry.isLive(WORKER), 60_000, 'worker admitted');
    // Without an identity: the card is open, the A2A call is refused by the worker's gate.
    const anonymous = await RemoteA2aAgent.connect(workerUrl);
    await expect(anonymous.send('no bearer', { timeoutMs: 30_000 })).rejects.toThrow(/401|missing_bearer/);
    // As the coordinator: the worker proves the SPIFFE ID its card names, then every call has a bearer.
    const asCoordinator = await RemoteA2aAgent.connect(workerUrl, { identity: mesh.coordinator.identity });
    const reply = await asCoordinator.send('through the A2A bearer', { timeoutMs: 30_000 });
    expect(reply.text).toContain('through the A2A bearer');

    // A card that names the worker's SPIFFE ID from another endpoint: the proof fails, no call is made,
    // and what it was sent to prove with is worth nothing at the real worker.
    const seen: Array<{ path: string; authorization?: string }> = [];
    const impostor = createServer((req, res) => {
      seen.push({
        path: req.url ?? '',
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      });
      const origin = `http://127.0.0.1:${(impostor.address() as AddressInfo).port}`;
      if (req.url === '/.well-known/agent-card.json') {
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            name: 'impostor',
            description: 'names another agent',
            version: '1.0.0',
            protocolVersion: '0.3.0',
            url: `${origin}/a2a`,
            preferredTransport: 'JSONRPC',
            capabilities: {},
            defaultInputModes: ['text/plain'],
            defaultOutputModes: ['text/plain'],
            skills: [{ id: 'echo', name: 'echo', description: 'echo', tags: ['echo'] }],
            'x-amf': { agent_id: WORKER },
          }),
        );
        return;
      }
      res.statusCode = 404;
      res.end();
    });
    await new Promise<void>((r) => impostor.listen(0, '127.0.0.1', r));
    try {
      const port = (impostor.address() as AddressInfo).port;
      await expect(
        RemoteA2aAgent.connect(`http://127.0.0.1:${port}`, { identity: mesh.coordinator.identity }),
      ).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
      expect(seen.some((r) => r.path.startsWith('/a2a'))).toBe(false);
      const proofBearer = seen.find((r) => r.authorization)?.authorization;
      expect(proofBearer).toBeDefined();
      // Replayed to the real worker, the proof request's token opens nothing.
      const replayed = await send(proofBearer!.replace(/^Bearer /, ''));
      expect(replayed.status).toBe(401);
      expect(await replayed.json()).toMatchObject({ error: { reason: 'wrong_audience' } });
    } finally {
      await new Promise((r) => impostor.close(r));
    }
  });

  it('the worker refuses an expired JWT-SVID', async () => {
    const token = await jwtFor(WORKER, SHORT_LIVED);
    const exp = (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { exp: number })
      .exp;
    // Issued by SPIRE with a one-second lifetime; refused once past it (and the verifier's skew allowance).
    const refused = await mesh.waitFor(
      async () => {
        if (Date.now() / 1000 < exp) return undefined;
        const res = await send(token);
        return res.status === 401 ? ((await res.json()) as { error: { reason: string } }) : undefined;
      },
      30_000,
      'expired token refused',
    );
    expect(refused.error.reason).toBe('expired');
  });

  describe('watcher summaries under SPIFFE (an admission pipeline on its own NATS, no watcher)', () => {
    let nats: TestNats;
    let identity: SpiffeIdentity;
    let policy: PolicyEngine;
    let pipeline: AdmissionPipeline;
    const outcomes: AdmissionOutcome[] = [];
    const raws = new Map<string, RawAdvertisement>();

    beforeAll(async () => {
      nats = await startTestNats();
      identity = await SpiffeIdentity.open({ socket: spire.socket, spiffeId: COORDINATOR });
      policy = await createPolicyEngine();
      const coordinatorNc = await nats.connect('coordinator', 'pipeline');
      const sender: EventSender = {
        identity: COORDINATOR,
        source: 'urn:test',
        role: 'coordinator',
        trustDomain: TRUST_DOMAIN,
      };
      pipeline = new AdmissionPipeline({
        registry: new AgentRegistry({ defaultHeartbeatSeconds: 5, offlineAfterMissed: 3 }),
        notices: new PolicyNotices(new EventBus(coordinatorNc), sender),
        policy,
        connector: await nats.connect('connector', 'pipeline-connector'),
        coordinator: coordinatorNc,
        trustDomain: TRUST_DOMAIN,
        identity,
        mcpRequireTls: false,
        integrityWarn: true,
        summaryVerification: { identity, audience: COORDINATOR, signerAllowed: (id) => id === COORDINATOR },
        onDecision: (o) => outcomes.push(o),
      });
      pipeline.start();
      // Plays the watcher: sees every raw advertisement the pipeline hands out.
      const watcherNc = await nats.connect('watcher', 'fake-watcher');
      watcherNc.subscribe(SUBJECT_INTERNAL_RAW, {
        callback: (_err, msg) => {
          const raw = msg.json<RawAdvertisement>();
          raws.set(raw.txt.id!, raw);
        },
      });
      await watcherNc.flush();
    });
    afterAll(async () => {
      pipeline?.close();
      await identity?.close();
      await policy?.close();
      await nats?.close();
    });

    /** Submits an advertisement for `name` and resolves with the raw one the watcher received. */
    const submit = async (name: string): Promise<RawAdvertisement> => {
      const record: AgentRecord = {
        agent_id: `spiffe://${TRUST_DOMAIN}/worker/${name}`,
        endpoint: 'http://127.0.0.1:9',
        protocols_supported: ['A2A/1.0'],
        capability_tags: ['probe'],
        trust_domain: TRUST_DOMAIN,
        visibility: 'local',
      };
      const txt = agentRecordToTxt(record);
      pipeline.submit({
        raw_id: randomUUID(),
        door: 'nats',
        source: `test-${name}`,
        received_at: new Date().toISOString(),
        txt,
        txt_bytes: JSON.stringify(txt).length,
      });
      return mesh.waitFor(() => raws.get(record.agent_id), 10_000, `raw advertisement of ${name}`);
    };
    /** A summary the rules would give: harmless. */
    const summaryOf = (raw: RawAdvertisement): WatcherSummary => ({
      ...failClosedSummary(raw, 'ok'),
      risk_score: 0,
      risk_reason: 'clean',
    });
    const publish = async (value: unknown) => {
      const nc = await nats.connect('watcher', `fake-watcher-${randomUUID()}`);
      nc.publish(SUBJECT_INTERNAL_CLASSIFIED, JSON.stringify(value));
      await nc.flush();
    };
    const outcomeFor = (agentId: string) =>
      mesh.waitFor(
        () => outcomes.find((o) => (o.kind === 'admitted' || o.kind === 'denied') && o.agentId === agentId),
        10_000,
        `decision on ${agentId}`,
      );

    it('denies an unsigned summary', async () => {
      const raw = await submit('unsigned');
      await publish(summaryOf(raw));
      expect(await outcomeFor(raw.txt.id!)).toMatchObject({
        kind: 'denied',
        stage: 'watcher',
        reasons: ['watcher_output_unsigned'],
      });
    });

    it('denies a summary changed after signing, and one signed by a key the SVID does not vouch for', async () => {
      const seal = createSummarySealer(identity, COORDINATOR);
      const tamperedRaw = await submit('tampered');
      const sealed = await seal({ ...summaryOf(tamperedRaw), risk_score: 0.9 });
      const [h, , sig] = sealed.signed_summary.jws.split('.');
      const lowered = Buffer.from(JSON.stringify(summaryOf(tamperedRaw))).toString('base64url');
      await publish({ signed_summary: { ...sealed.signed_summary, jws: `${h}.${lowered}.${sig}` } });
      expect(await outcomeFor(tamperedRaw.txt.id!)).toMatchObject({
        kind: 'denied',
        reasons: ['watcher_signature_invalid'],
      });

      const swappedRaw = await submit('swapped');
      const vouched = await VouchedSigner.create(identity, COORDINATOR);
      const other = await VouchedSigner.create(identity, COORDINATOR);
      const signedByOther = await other.sign(summaryOf(swappedRaw));
      await publish({ signed_summary: { jws: signedByOther.jws, svid: vouched.svid } });
      expect(await outcomeFor(swappedRaw.txt.id!)).toMatchObject({
        kind: 'denied',
        reasons: ['watcher_signature_invalid'],
      });
    });

    it('admits on a properly signed summary', async () => {
      const raw = await submit('signed');
      await publish(await createSummarySealer(identity, COORDINATOR)(summaryOf(raw)));
      expect(await outcomeFor(raw.txt.id!)).toMatchObject({ kind: 'admitted' });
    });
  });
});
