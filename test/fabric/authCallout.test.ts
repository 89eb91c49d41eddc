// Per-agent NATS users on an external NATS through auth callout (issue 12): a real nats-server 2.12
// configured as the cluster nodes are, a real coordinator (`nats.url` + `nats.auth_callout`) answering
// the callout, real workers joining through the join door and then logging in with their own keys.
// Each refusal is the server's (the client's connect or publish fails), decided by the coordinator.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createUser } from '@nats-io/jwt';
import { loadConfig } from '../../src/config/config.js';
import { Coordinator } from '../../src/coordinator/coordinator.js';
import { startWorker, type RunningWorker } from '../../src/apps/workerApp.js';
import { echoHandler } from '../../src/worker/handlers/echo.js';
import { connectAs, connectAsAgent, NatsAuthError } from '../../src/fabric/connect.js';
import { JOIN_USER } from '../../src/fabric/credentials.js';
import { createEphemeralAgentKey, type AgentKey } from '../../src/identity/agentKey.js';
import { startCalloutNats, type CalloutNats } from '../helpers/calloutNats.js';
import { waitFor } from '../helpers/waitFor.js';
import { calloutKeyFile, readCalloutIssuer } from '../../src/identity/calloutIssuer.js';
import { AUTH_CALLOUT_SUBJECT, SERVER_XKEY_HEADER } from '../../src/coordinator/authCallout.js';

interface Warning {
  reason: string;
  agent_id: string;
  details?: Record<string, unknown>;
}

describe('auth callout: per-agent NATS users on an external NATS', () => {
  let dataDir: string;
  let nats: CalloutNats;
  let coordinator: Coordinator;
  let observer: NatsConnection;
  const warnings: Warning[] = [];
  const workers: RunningWorker[] = [];
  const extra: NatsConnection[] = [];

  const startCoordinator = async (port = 0): Promise<Coordinator> => {
    const config = await loadConfig({
      env: { HOME: tmpdir() },
      flags: {
        dataDir,
        logLevel: 'silent',
        coordinator: { port },
        // A short user JWT lifetime so that the revocation test sees the server cut a connection.
        // The server's log is followed: its permission refusals become warnings.
        nats: { url: nats.url, authCallout: true, authCalloutTtlSeconds: 5, serverLogs: [nats.logFile] },
        heartbeat: { intervalSeconds: 1, offlineAfterMissed: 3 },
        mdns: { enabled: false },
      },
    });
    return Coordinator.start({ config, env: { HOME: tmpdir() } });
  };

  const join_ = async (
    c: Coordinator,
    name: string,
    tags: string[],
    key: AgentKey,
  ): Promise<RunningWorker> => {
    const w = await startWorker({
      name,
      tags,
      handler: echoHandler,
      natsUrl: nats.url,
      join: c.joinCredential,
      key,
      port: 0,
      heartbeatSeconds: 1,
    });
    workers.push(w);
    await waitFor(() => c.registry.isLive(w.worker.agentId), `${name} admitted`);
    return w;
  };

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'amf-callout-test-'));
    // The specialist role is left out of the static users: its login goes through the callout too.
    nats = await startCalloutNats(dataDir, { specialistUser: false });
    coordinator = await startCoordinator();
    observer = await connectAs(nats.url, coordinator.credentials.coordinator, 'test-observer');
    observer.subscribe('amf.policy.warning', {
      callback: (err, msg) => {
        if (!err) warnings.push(msg.json<{ data: { payload: Warning } }>().data.payload);
      },
    });
    await observer.flush();
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(workers.map((w) => w.close(5000)));
    await Promise.allSettled(extra.map((c) => c.close()));
    await observer?.close();
    await coordinator?.close();
    await nats?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('an admitted agent logs in with its own key and is held to its own tags by the server', async () => {
    const alphaKey = createEphemeralAgentKey();
    await join_(coordinator, 'callout-alpha', ['alpha'], alphaKey);
    await join_(coordinator, 'callout-beta', ['beta'], createEphemeralAgentKey());
    // The worker's whole path runs on its callout-issued user: pull, claim, final.
    const answer = await coordinator.dispatcher.submit({ tag: 'alpha', task: 'hello', timeoutMs: 20_000 });
    expect(answer.text).toBe('hello');

    // A second connection with alpha's key: its own queue is open, beta's is refused by the server.
    const nc = await connectAsAgent(nats.url, alphaKey, 'alpha-probe', { maxReconnectAttempts: 0 });
    extra.push(nc);
    const js = jetstream(nc, { timeout: 2_000 });
    const own = await js.consumers.get('AMF_WORK', 'workers_alpha');
    expect((await own.info()).name).toBe('workers_alpha');
    await expect(
      js.consumers.get('AMF_WORK', 'workers_beta').then((c) => c.next({ expires: 1_000 })),
    ).rejects.toThrow(
      /Permissions Violation for Publish to "\$JS\.API\.CONSUMER\.INFO\.AMF_WORK\.workers_beta"/,
    );
    // Nor may it read announcements or publish cancellations.
    const denied = nc.subscribe('amf.task.announce.beta');
    expect(String(await denied.closed)).toMatch(/Permissions Violation for Subscription/);

    // Each refusal, read from the server's log, is warned naming the agent whose key tried it.
    const alphaId = coordinator.registry.list().find((a) => a.record.nkey === alphaKey.publicKey)!.record
      .agent_id;
    const refused = await waitFor(
      () =>
        warnings.find(
          (w) =>
            w.reason === 'permission_violation' &&
            w.agent_id === alphaId &&
            w.details?.subject === 'amf.task.announce.beta',
        ),
      'the refused subscription warned',
    );
    // The server names a callout-issued user by the name the callout gave it: the agent id.
    expect(refused.details).toMatchObject({ kind: 'subscribe', nats_user: alphaId });
    expect(
      warnings.some(
        (w) => w.agent_id === alphaId && w.details?.subject === '$JS.API.CONSUMER.INFO.AMF_WORK.workers_beta',
      ),
    ).toBe(true);
  });

  it('gets every authorization request sealed to the mesh’s curve key (auth_callout.xkey)', async () => {
    const issuer = await readCalloutIssuer(calloutKeyFile(dataDir, {}));
    const seen: { data: Uint8Array; xkey: string | undefined }[] = [];
    // A second subscriber on the callout subject (outside the responders' queue group) gets a copy.
    const tap = observer.subscribe(AUTH_CALLOUT_SUBJECT, {
      callback: (_err, msg) => {
        seen.push({ data: msg.data, xkey: msg.headers?.get(SERVER_XKEY_HEADER) });
      },
    });
    await observer.flush();
    await expect(
      connectAs(nats.url, { user: JOIN_USER, password: 'not-the-password' }, 'sealed-probe', {
        maxReconnectAttempts: 0,
      }),
    ).rejects.toBeInstanceOf(NatsAuthError);
    const request = await waitFor(() => seen[0], 'a copy of the authorization request');
    tap.unsubscribe();
    const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
    // What crosses the fabric is not the JWT (which would carry the password) but its sealed form.
    expect(request.xkey).toMatch(/^X[A-Z2-7]{55}$/);
    expect(text(request.data)).not.toContain('eyJ');
    expect(text(request.data)).not.toContain('not-the-password');
    const opened = issuer?.xkey.open(request.data, request.xkey ?? '');
    expect(opened && text(opened).startsWith('eyJ')).toBe(true);
  });

  it('refuses an unknown key at connect', async () => {
    await expect(
      connectAsAgent(nats.url, createEphemeralAgentKey(), 'stranger', { maxReconnectAttempts: 0 }),
    ).rejects.toBeInstanceOf(NatsAuthError);
  });

  it('refuses a live agent’s key presented with a forged nonce signature, and warns naming the key', async () => {
    const victimKey = createEphemeralAgentKey();
    const victim = await join_(coordinator, 'callout-victim', ['gamma'], victimKey);
    const forger = createUser();
    await expect(
      connect({
        servers: nats.url,
        maxReconnectAttempts: 0,
        // The victim's public key, but a signature over the nonce made with another key.
        authenticator: (nonce?: string) => ({
          nkey: victimKey.publicKey,
          sig: Buffer.from(forger.sign(new TextEncoder().encode(nonce ?? ''))).toString('base64url'),
        }),
      }),
    ).rejects.toThrow(/authorization/i);
    const warning = await waitFor(
      () => warnings.find((w) => w.details?.refusal === 'bad_signature'),
      'a bad_signature warning',
    );
    expect(warning.reason).toBe('permission_violation');
    expect(warning.agent_id).toBe(`key ${victimKey.publicKey}`);
    expect(warning.details?.claimed_agent).toBe(victim.worker.agentId);
  });

  it('checks role and join passwords: right ones get in with their permissions, wrong ones are refused', async () => {
    const { credentials, joinCredential } = coordinator;
    await expect(
      connectAs(nats.url, { user: JOIN_USER, password: 'not-the-join-password' }, 'bad-join', {
        maxReconnectAttempts: 0,
      }),
    ).rejects.toBeInstanceOf(NatsAuthError);
    await expect(
      connectAs(nats.url, { user: credentials.specialist.user, password: 'wrong' }, 'bad-specialist', {
        maxReconnectAttempts: 0,
      }),
    ).rejects.toBeInstanceOf(NatsAuthError);
    await waitFor(
      () => warnings.find((w) => w.details?.refusal === 'wrong_password' && w.agent_id === JOIN_USER),
      'a wrong_password warning naming the join user',
    );

    // The join user may advertise and nothing else: a subscription is refused by the server.
    const joined = await connectAs(nats.url, joinCredential, 'good-join', { maxReconnectAttempts: 0 });
    extra.push(joined);
    const sub = joined.subscribe('amf.policy.deny');
    expect(String(await sub.closed)).toMatch(/Permissions Violation for Subscription/);
    // The specialist (legacy) gets its role's grants through the callout: it may read announcements.
    const specialist = await connectAs(nats.url, credentials.specialist, 'good-specialist', {
      maxReconnectAttempts: 0,
    });
    extra.push(specialist);
    const ok = specialist.subscribe('amf.task.announce.alpha');
    await specialist.flush();
    expect(ok.isClosed()).toBe(false);
  });

  it('cuts a revoked agent at its user JWT’s expiry and does not let it back in', async () => {
    const key = createEphemeralAgentKey();
    const w = await join_(coordinator, 'callout-revoked', ['delta'], key);
    const nc = await connectAsAgent(nats.url, key, 'revoked-probe', { maxReconnectAttempts: 0 });
    extra.push(nc);
    await w.close(5000); // goodbye: the agent is no longer live
    workers.splice(workers.indexOf(w), 1);
    await waitFor(() => !coordinator.registry.isLive(w.worker.agentId), 'the agent offline');
    // The server closes the connection when the 5 s user JWT expires; reconnecting is refused.
    expect(String(await nc.closed())).toMatch(/Authorization Violation|Expired/i);
    await expect(
      connectAsAgent(nats.url, key, 'revoked-again', { maxReconnectAttempts: 0 }),
    ).rejects.toBeInstanceOf(NatsAuthError);
  });

  it('keeps letting agents in when one of two coordinators answering the callout is gone', async () => {
    const second = await startCoordinator();
    try {
      await coordinator.close();
      const key = createEphemeralAgentKey();
      const w = await join_(second, 'callout-after', ['epsilon'], key);
      const answer = await second.dispatcher.submit({ tag: 'epsilon', task: 'still', timeoutMs: 20_000 });
      expect(answer.text).toBe('still');
      expect(w.nc.isClosed()).toBe(false);
    } finally {
      await second.close();
    }
  });
});
