/**
 * WebSub (W3C) on the subscriber side of a webhook interface: intent verification on `GET <path>`
 * (echo `hub.challenge` only for an intent this agent wants), the subscription request at start-up
 * (form POST to the hub, 3 attempts in the background), renewal before the lease ends, and
 * unsubscription on shutdown.
 */
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { Logger } from '../../log.js';
import { sendJson } from '../../http/httpKit.js';
import { AmfError } from '../../errors.js';

export interface WebSubOptions {
  /** Hub URL; absent = subscribed manually (verification only). */
  hub?: string;
  topic?: string;
  /** The callback URL the hub delivers to (subscription.callback, else the bound URL + path; late-bound). */
  callback: string | (() => string);
  secret?: string;
  /** Extra headers for the hub (from subscription.authentication). */
  headers?: Record<string, string>;
  leaseSeconds?: number;
  attempts?: number;
  retryDelayMs?: number;
  requestTimeoutMs?: number;
  /** How long close() waits for the hub to verify the unsubscription (default 5 s). */
  unsubscribeWaitMs?: number;
  log?: Logger;
}

export type WebSubState =
  'manual' | 'idle' | 'requested' | 'verified' | 'denied' | 'failed' | 'unsubscribing' | 'unsubscribed';

const MAX_CHALLENGE = 1024;

/**
 * One WebSub subscription. Emits `state` (the new state) on every change, so tests and logs can wait
 * for `verified` instead of sleeping.
 */
export class WebSubSubscription extends EventEmitter {
  private current: WebSubState;
  private renewTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** The lease the hub granted in its last verification, in seconds. */
  leaseSeconds: number | undefined;
  /** How many subscription requests were sent (renewals included). */
  requestsSent = 0;

  constructor(private readonly opts: WebSubOptions) {
    super();
    this.current = opts.hub && opts.topic ? 'idle' : 'manual';
  }

  get state(): WebSubState {
    return this.current;
  }

  private setState(state: WebSubState): void {
    this.current = state;
    this.emit('state', state);
  }

  /** Sends the subscription request in the background (no-op for manual subscriptions). */
  start(): void {
    if (this.current !== 'idle') return;
    this.setState('requested');
    this.requestSubscription('subscribe');
  }

  /** Answers a hub's intent verification or denial (`GET <path>?hub.mode=…`). */
  handleVerification(url: URL, res: ServerResponse): void {
    const q = url.searchParams;
    const mode = q.get('hub.mode');
    const topic = q.get('hub.topic');
    if (mode === 'denied') {
      if (this.topicMatches(topic)) {
        this.opts.log?.warn({ topic, reason: q.get('hub.reason') }, 'WebSub hub denied the subscription');
        this.setState('denied');
      }
      res.writeHead(200).end();
      return;
    }
    const challenge = q.get('hub.challenge');
    if ((mode !== 'subscribe' && mode !== 'unsubscribe') || !challenge || challenge.length > MAX_CHALLENGE) {
      sendJson(res, 400, {
        error: {
          code: 'INVALID_REQUEST',
          message: 'WebSub verification needs hub.mode (subscribe|unsubscribe), hub.topic and hub.challenge',
        },
      });
      return;
    }
    if (!this.topicMatches(topic) || !this.wants(mode)) {
      sendJson(res, 404, {
        error: { code: 'NOT_FOUND', message: `no pending ${mode} intent for this topic` },
      });
      return;
    }
    if (mode === 'subscribe') {
      const lease = Number(q.get('hub.lease_seconds'));
      this.leaseSeconds = Number.isInteger(lease) && lease > 0 ? lease : (this.opts.leaseSeconds ?? 86400);
      if (this.current !== 'manual') {
        this.setState('verified');
        this.scheduleRenewal(this.leaseSeconds);
      }
    } else if (this.current === 'unsubscribing') {
      this.setState('unsubscribed');
    }
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(challenge);
  }

  /** Stops renewing; unsubscribes at the hub when the subscription was verified. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.renewTimer);
    clearTimeout(this.retryTimer);
    if (this.current !== 'verified') return;
    this.setState('unsubscribing');
    try {
      await this.send('unsubscribe');
    } catch (err) {
      this.opts.log?.warn({ err: (err as Error).message }, 'WebSub unsubscribe failed');
      return;
    }
    // The hub verifies the unsubscription with a GET to our callback: stay up for it, a bounded while.
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.off('state', onState);
        resolve();
      };
      const onState = (state: WebSubState) => {
        if (state === 'unsubscribed') done();
      };
      const timer = setTimeout(done, this.opts.unsubscribeWaitMs ?? 5000);
      timer.unref();
      this.on('state', onState);
    });
  }

  private topicMatches(topic: string | null): boolean {
    return this.opts.topic === undefined || topic === this.opts.topic;
  }

  /** Only intents this agent asked for are confirmed (a third party cannot subscribe or unsubscribe it). */
  private wants(mode: 'subscribe' | 'unsubscribe'): boolean {
    if (this.current === 'manual') return true;
    if (mode === 'subscribe') return this.current === 'requested' || this.current === 'verified';
    return this.current === 'unsubscribing';
  }

  private scheduleRenewal(leaseSeconds: number): void {
    clearTimeout(this.renewTimer);
    if (this.closed) return;
    // Renew at 80% of the lease so a slow hub still verifies before expiry.
    const delayMs = Math.max(1000, Math.floor(leaseSeconds * 800));
    this.renewTimer = setTimeout(() => this.requestSubscription('subscribe'), delayMs);
    this.renewTimer.unref();
  }

  private requestSubscription(mode: 'subscribe', attempt = 1): void {
    if (this.closed) return;
    const attempts = this.opts.attempts ?? 3;
    this.send(mode).then(
      () =>
        this.opts.log?.info({ hub: this.opts.hub, topic: this.opts.topic }, 'WebSub subscription requested'),
      (err: unknown) => {
        const message = (err as Error).message;
        if (attempt >= attempts || this.closed) {
          this.opts.log?.error({ hub: this.opts.hub, err: message, attempts }, 'WebSub subscription failed');
          if (this.current === 'requested') this.setState('failed');
          return;
        }
        this.opts.log?.warn({ hub: this.opts.hub, err: message, attempt }, 'WebSub subscription retry');
        this.retryTimer = setTimeout(
          () => this.requestSubscription(mode, attempt + 1),
          this.opts.retryDelayMs ?? 5000,
        );
        this.retryTimer.unref();
      },
    );
  }

  private async send(mode: 'subscribe' | 'unsubscribe'): Promise<void> {
    const form = new URLSearchParams({
      'hub.mode': mode,
      'hub.topic': this.opts.topic!,
      'hub.callback': typeof this.opts.callback === 'string' ? this.opts.callback : this.opts.callback(),
    });
    if (mode === 'subscribe') {
      form.set('hub.lease_seconds', String(this.opts.leaseSeconds ?? 86400));
      if (this.opts.secret) form.set('hub.secret', this.opts.secret);
      this.requestsSent++;
    }
    const res = await fetch(this.opts.hub!, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(this.opts.headers ?? {}) },
      body: form.toString(),
      redirect: 'error',
      signal: AbortSignal.timeout(this.opts.requestTimeoutMs ?? 10_000),
    });
    await res.body?.cancel();
    if (res.status < 200 || res.status > 299)
      throw new AmfError('UNAVAILABLE', `hub answered HTTP ${res.status}`);
  }
}

/** HTTP headers for an AFM authentication object (bearer, basic, api-key); other types are refused. */
export function authenticationHeaders(auth: Record<string, unknown> | undefined): Record<string, string> {
  if (!auth) return {};
  const str = (key: string): string => {
    const v = auth[key];
    if (typeof v !== 'string' || v === '')
      throw new AmfError('INVALID_REQUEST', `authentication type "${String(auth.type)}" needs "${key}"`);
    return v;
  };
  switch (auth.type) {
    case 'bearer':
      return { authorization: `Bearer ${str('token')}` };
    case 'basic':
      return {
        authorization: `Basic ${Buffer.from(`${str('username')}:${str('password')}`).toString('base64')}`,
      };
    case 'api-key':
      return { authorization: str('api_key') };
    default:
      throw new AmfError(
        'INVALID_REQUEST',
        `authentication type "${String(auth.type)}" is not supported for WebSub hubs`,
      );
  }
}
