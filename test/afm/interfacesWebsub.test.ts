// WebSub on the webhook interface against a local fake hub (a real HTTP peer): the subscription
// request at start, intent verification (challenge echo only for wanted intents), retries, lease
// renewal before expiry, and unsubscription on shutdown.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EventEmitter, once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { afm, recordingResponder, serveAgent } from './interfacesKit.js';
import type { RunningAgent } from '../../src/apps/afmAgentApp.js';
import type { WebSubState } from '../../src/afm/interfaces/websub.js';

const TOPIC = 'http://127.0.0.1/topics/builds';

interface HubRequest {
  form: URLSearchParams;
  headers: Record<string, string | string[] | undefined>;
}
interface Verification {
  mode: string;
  status: number;
  body: string;
  challenge: string;
}

/** A WebSub hub: records subscription requests, answers `failFirst` of them with 503, then 202 and verifies. */
async function startFakeHub(opts: { failFirst?: number; leaseSeconds?: number } = {}) {
  const requests: HubRequest[] = [];
  const verifications: Verification[] = [];
  const events = new EventEmitter();
  const errors: unknown[] = [];
  let failures = opts.failFirst ?? 0;
  const verify = async (form: URLSearchParams) => {
    const challenge = `challenge-${Math.random().toString(36).slice(2)}`;
    const url = new URL(form.get('hub.callback')!);
    url.searchParams.set('hub.mode', form.get('hub.mode')!);
    url.searchParams.set('hub.topic', form.get('hub.topic')!);
    url.searchParams.set('hub.challenge', challenge);
    if (form.get('hub.mode') === 'subscribe')
      url.searchParams.set('hub.lease_seconds', String(opts.leaseSeconds ?? form.get('hub.lease_seconds')));
    const res = await fetch(url);
    const v = { mode: form.get('hub.mode')!, status: res.status, body: await res.text(), challenge };
    verifications.push(v);
    events.emit('verification', v);
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      requests.push({ form, headers: req.headers });
      events.emit('request', form);
      if (failures > 0) {
        failures--;
        res.writeHead(503).end();
        return;
      }
      res.writeHead(202).end();
      // Verification of intent happens after the 202, as the WebSub spec describes.
      setImmediate(() => void verify(form).catch((err: unknown) => errors.push(err)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hub`;
  return {
    url,
    requests,
    verifications,
    events,
    /** Verification requests that could not reach the callback. */
    errors,
    /** Resolves when `n` verifications were made. */
    async verified(n: number): Promise<Verification> {
      while (verifications.length < n) await once(events, 'verification');
      return verifications[n - 1]!;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function webhookAfm(hub: string, extra = '') {
  return afm(
    [
      'interfaces:',
      '  - type: webhook',
      '    subscription:',
      '      protocol: websub',
      `      hub: ${hub}`,
      `      topic: ${TOPIC}`,
      '      secret: s3cret',
      '      authentication: { type: bearer, token: hub-token }',
      extra,
    ].join('\n'),
  );
}

async function stateReached(agent: RunningAgent, state: WebSubState): Promise<void> {
  const websub = agent.interfaces.websub!;
  while (websub.state !== state) await once(websub, 'state');
}

describe('WebSub subscription', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it('subscribes at start, echoes the hub challenge, renews before the lease ends and unsubscribes on close', async () => {
    const hub = await startFakeHub({ leaseSeconds: 2 });
    cleanups.push(hub.close);
    const agent = await serveAgent(webhookAfm(hub.url), recordingResponder());
    cleanups.push(() => agent.close());
    const first = await hub.verified(1);
    expect(first).toMatchObject({ mode: 'subscribe', status: 200, body: first.challenge });
    const form = hub.requests[0]!.form;
    expect(Object.fromEntries(form)).toEqual({
      'hub.mode': 'subscribe',
      'hub.topic': TOPIC,
      'hub.callback': `${agent.url}/webhook`,
      'hub.lease_seconds': '86400',
      'hub.secret': 's3cret',
    });
    expect(hub.requests[0]!.headers.authorization).toBe('Bearer hub-token');
    expect(agent.interfaces.websub!.state).toBe('verified');
    expect(agent.interfaces.websub!.leaseSeconds).toBe(2);
    // The hub granted 2 s: the agent asks again before they run out, and the hub verifies again.
    const renewal = await hub.verified(2);
    expect(renewal).toMatchObject({ mode: 'subscribe', status: 200 });
    expect(hub.requests.filter((r) => r.form.get('hub.mode') === 'subscribe')).toHaveLength(2);
    // Shutdown: unsubscribe at the hub, whose verification the agent confirms before its server closes.
    const unsubscribed = stateReached(agent, 'unsubscribed');
    await agent.close();
    await unsubscribed;
    while (!hub.verifications.some((v) => v.mode === 'unsubscribe')) await once(hub.events, 'verification');
    const last = hub.verifications.find((v) => v.mode === 'unsubscribe')!;
    expect(last).toMatchObject({ status: 200, body: last.challenge });
    expect(hub.requests.at(-1)!.form.get('hub.mode')).toBe('unsubscribe');
    expect(hub.errors).toEqual([]);
  });

  it('refuses intents it did not ask for and topics it does not follow', async () => {
    const hub = await startFakeHub();
    cleanups.push(hub.close);
    const agent = await serveAgent(webhookAfm(hub.url), recordingResponder());
    cleanups.push(() => agent.close());
    await hub.verified(1);
    const q = (params: Record<string, string>) =>
      fetch(`${agent.url}/webhook?${new URLSearchParams(params)}`);
    // Someone else trying to unsubscribe the agent.
    const unsub = await q({ 'hub.mode': 'unsubscribe', 'hub.topic': TOPIC, 'hub.challenge': 'evil' });
    expect(unsub.status).toBe(404);
    const other = await q({
      'hub.mode': 'subscribe',
      'hub.topic': 'http://127.0.0.1/other',
      'hub.challenge': 'c',
    });
    expect(other.status).toBe(404);
    expect(await other.text()).not.toContain('"c"');
    const noChallenge = await q({ 'hub.mode': 'subscribe', 'hub.topic': TOPIC });
    expect(noChallenge.status).toBe(400);
    // A re-verification of the agent's own subscription is confirmed.
    const again = await q({
      'hub.mode': 'subscribe',
      'hub.topic': TOPIC,
      'hub.challenge': 'again',
      'hub.lease_seconds': '600',
    });
    expect(again.status).toBe(200);
    expect(await again.text()).toBe('again');
  });

  it('retries a failing hub and reports the failure after 3 attempts', async () => {
    const flaky = await startFakeHub({ failFirst: 2 });
    cleanups.push(flaky.close);
    const ok = await serveAgent(webhookAfm(flaky.url), recordingResponder(), {
      websub: { retryDelayMs: 50 },
    });
    cleanups.push(() => ok.close());
    await flaky.verified(1);
    expect(flaky.requests).toHaveLength(3);
    expect(ok.interfaces.websub!.state).toBe('verified');

    const down = await startFakeHub({ failFirst: 100 });
    cleanups.push(down.close);
    const failing = await serveAgent(webhookAfm(down.url), recordingResponder(), {
      websub: { retryDelayMs: 50 },
    });
    cleanups.push(() => failing.close());
    await stateReached(failing, 'failed');
    expect(down.requests).toHaveLength(3);
  });

  it('a denial from the hub is recorded', async () => {
    const hub = await startFakeHub();
    cleanups.push(hub.close);
    const agent = await serveAgent(webhookAfm(hub.url), recordingResponder());
    cleanups.push(() => agent.close());
    await hub.verified(1);
    const denied = stateReached(agent, 'denied');
    const res = await fetch(
      `${agent.url}/webhook?${new URLSearchParams({ 'hub.mode': 'denied', 'hub.topic': TOPIC, 'hub.reason': 'no' })}`,
    );
    expect(res.status).toBe(200);
    await denied;
  });
});
