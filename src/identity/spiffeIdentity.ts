/**
 * The SPIFFE identity provider: this workload's X.509-SVID, its JWT-SVIDs and the trust bundles, all
 * from the SPIFFE Workload API. The agent pushes new SVIDs and bundles on its streams whenever they
 * rotate; the newest always replaces the last. A broken stream is reopened with backoff while the
 * last good material stays in use (it carries its own expiry, which verification checks).
 */
import type { X509Certificate } from 'node:crypto';
import type { JSONWebKeySet } from 'jose';
import { AmfError } from '../errors.js';
import type { LogFn } from '../log.js';
import type { IdentityProvider } from './identityProvider.js';
import { JwtSvidVerifier, type JwtBundles, type JwtSvidCheck } from './jwtSvidVerifier.js';
import { parseSpiffeId, trustDomainName } from './spiffeId.js';
import { WorkloadApiClient, type Unwatch, type WatchCallbacks } from './workloadApiClient.js';
import type { JwtBundlesResponse, X509SvidResponse } from './workloadApiSchema.js';
import { parseCertificates, parseX509Svid, type X509Svid } from './x509Material.js';

/** Options of {@link SpiffeIdentity.open}. */
export interface SpiffeIdentityOptions {
  /** `SPIFFE_ENDPOINT_SOCKET` (unix:///path). */
  socket: string;
  /** Which of several SPIFFE IDs to be (default: the first the agent sends). */
  spiffeId?: string;
  /** How long to wait for the first SVID and bundle (default 10 s). */
  timeoutMs?: number;
  log?: LogFn;
}

/** Entries in the JWT-SVID cache (one per audience set). */
const MAX_CACHED_JWT_SVIDS = 1024;
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 5_000;

interface CachedJwt {
  token: string;
  /** Reuse until here (half the token's lifetime), then fetch a fresh one. */
  refreshAt: number;
}

/** SVIDs and bundles from the SPIFFE Workload API. */
export class SpiffeIdentity implements IdentityProvider {
  readonly mode = 'spiffe' as const;
  readonly svidVerified = true;
  private svid: X509Svid | undefined;
  private x509: Map<string, readonly X509Certificate[]> = new Map();
  private jwt: Map<string, JSONWebKeySet> = new Map();
  private readonly verifier = new JwtSvidVerifier(() => this.jwt);
  private readonly jwtCache = new Map<string, CachedJwt>();
  private readonly unwatch = new Set<Unwatch>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly listeners = new Set<(what: 'x509' | 'jwt_bundles') => void>();
  private closed = false;
  /** How many updates each stream delivered (rotation is observable). */
  readonly updates = { x509: 0, jwtBundles: 0 };

  private constructor(
    private readonly client: WorkloadApiClient,
    private readonly options: SpiffeIdentityOptions,
  ) {}

  /** Connects and waits for the first X.509-SVID and JWT bundle; throws when none come in time. */
  static async open(options: SpiffeIdentityOptions): Promise<SpiffeIdentity> {
    const identity = new SpiffeIdentity(new WorkloadApiClient(options.socket), options);
    const timeoutMs = options.timeoutMs ?? 10_000;
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new AmfError(
                'UNAVAILABLE',
                `the SPIFFE Workload API at ${options.socket} gave no SVID and bundle within ${timeoutMs} ms`,
              ),
            ),
          timeoutMs,
        );
        const check = () => {
          if (identity.svid && identity.jwt.size > 0) {
            clearTimeout(timer);
            identity.listeners.delete(check);
            resolve();
          }
        };
        identity.listeners.add(check);
        identity.follow<X509SvidResponse>(
          'x509',
          (cb) => identity.client.watchX509Svids(cb),
          (m) => identity.onX509(m),
          reject,
        );
        identity.follow<JwtBundlesResponse>(
          'jwt_bundles',
          (cb) => identity.client.watchJwtBundles(cb),
          (m) => identity.onJwt(m),
          reject,
        );
      });
    } catch (err) {
      await identity.close();
      throw err;
    }
    return identity;
  }

  get agentId(): string {
    return this.svid!.spiffeId;
  }

  get trustDomain(): string {
    return parseSpiffeId(this.svid!.spiffeId)!.trustDomain;
  }

  x509Svid(): X509Svid | undefined {
    return this.svid;
  }

  x509Bundles(): ReadonlyMap<string, readonly X509Certificate[]> {
    return this.x509;
  }

  /** The JWT bundles by trust domain (newest). */
  jwtBundles(): JwtBundles {
    return this.jwt;
  }

  /** Called after every update of a stream (tests, rotation observers). */
  onUpdate(listener: (what: 'x509' | 'jwt_bundles') => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async jwtSvid(audience: readonly string[]): Promise<string> {
    if (this.closed) throw new AmfError('UNAVAILABLE', 'the SPIFFE identity is closed');
    if (audience.length === 0)
      throw new AmfError('INVALID_REQUEST', 'a JWT-SVID needs at least one audience');
    const key = audience.join('\n');
    const cached = this.jwtCache.get(key);
    if (cached && Date.now() < cached.refreshAt) return cached.token;
    const res = await this.client.fetchJwtSvid([...audience], this.svid?.spiffeId ?? '');
    const svid = res.svids[0];
    if (!svid?.svid) throw new AmfError('UNAVAILABLE', 'the SPIFFE Workload API returned no JWT-SVID');
    const check = await this.verifier.verify(svid.svid, audience[0]!);
    // Only a token that verifies against our own bundle is handed out (and cached until half-life).
    if (!check.ok)
      throw new AmfError('UNAVAILABLE', `the JWT-SVID from the agent does not verify: ${check.message}`);
    const now = Date.now();
    const lifetimeMs = Math.max(0, check.expiresAt * 1000 - now);
    if (this.jwtCache.size >= MAX_CACHED_JWT_SVIDS) this.jwtCache.delete(this.jwtCache.keys().next().value!);
    this.jwtCache.set(key, { token: svid.svid, refreshAt: now + lifetimeMs / 2 });
    return svid.svid;
  }

  verifyJwtSvid(token: string, audience: string, now?: Date): Promise<JwtSvidCheck> {
    return this.verifier.verify(token, audience, now ? { now } : {});
  }

  /** Cross-check by the agent itself (ValidateJWTSVID); AMF's own checks do not depend on it. */
  async validateWithAgent(token: string, audience: string): Promise<string> {
    return (await this.client.validateJwtSvid(audience, token)).spiffe_id;
  }

  close(): Promise<void> {
    this.closed = true;
    for (const u of this.unwatch) u();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.client.close();
    return Promise.resolve();
  }

  private onX509(m: X509SvidResponse): void {
    const wanted = this.options.spiffeId;
    const chosen = wanted ? m.svids.find((s) => s.spiffe_id === wanted) : m.svids[0];
    if (!chosen)
      throw new AmfError(
        'UNAVAILABLE',
        `the Workload API sent no X.509-SVID${wanted ? ` for ${wanted}` : ''}`,
      );
    const svid = parseX509Svid(chosen.spiffe_id, chosen.x509_svid, chosen.x509_svid_key);
    const bundles = new Map<string, readonly X509Certificate[]>();
    bundles.set(parseSpiffeId(svid.spiffeId)!.trustDomain, parseCertificates(chosen.bundle));
    for (const [td, der] of Object.entries(m.federated_bundles ?? {}))
      bundles.set(trustDomainName(td), parseCertificates(der));
    this.svid = svid;
    this.x509 = bundles;
    this.updates.x509++;
    this.emit('x509');
  }

  private onJwt(m: JwtBundlesResponse): void {
    const bundles = new Map<string, JSONWebKeySet>();
    for (const [td, json] of Object.entries(m.bundles ?? {})) {
      const jwks = JSON.parse(Buffer.from(json).toString('utf8')) as JSONWebKeySet;
      if (!Array.isArray(jwks.keys))
        throw new AmfError('UNAVAILABLE', `the JWT bundle of ${td} is not a JWKS`);
      bundles.set(trustDomainName(td), jwks);
    }
    this.jwt = bundles;
    this.updates.jwtBundles++;
    this.emit('jwt_bundles');
  }

  private emit(what: 'x509' | 'jwt_bundles'): void {
    for (const l of [...this.listeners]) l(what);
  }

  /**
   * Keeps one stream open: every message goes to `apply`; a message that does not apply (malformed)
   * and a broken stream reopen it after a backoff. Before the first message, `failFirst` is told.
   */
  private follow<T>(
    what: string,
    watch: (cb: WatchCallbacks<T>) => Unwatch,
    apply: (m: T) => void,
    failFirst: (err: Error) => void,
    attempt = 0,
  ): void {
    if (this.closed) return;
    let unwatch: Unwatch | undefined = undefined;
    const retry = (err: Error) => {
      if (unwatch) {
        unwatch();
        this.unwatch.delete(unwatch);
      }
      if (this.closed) return;
      this.options.log?.('warn', `SPIFFE Workload API ${what} stream failed; reopening`, {
        err: err.message,
      });
      const delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** attempt);
      const t = setTimeout(() => {
        this.timers.delete(t);
        this.follow(what, watch, apply, failFirst, attempt + 1);
      }, delay);
      t.unref();
      this.timers.add(t);
    };
    unwatch = watch({
      onUpdate: (m) => {
        try {
          apply(m);
          attempt = 0;
        } catch (err) {
          if (!this.svid || this.jwt.size === 0) failFirst(err as Error);
          retry(err as Error);
        }
      },
      onError: (err) => retry(err),
    });
    this.unwatch.add(unwatch);
  }
}
