/**
 * TOFU (trust on first use) pinning of agents' TLS certificates for the `https://` tier of MCP call
 * authentication. Agents serve self-signed certificates, so no CA can vouch for them: the coordinator
 * records the SHA-256 fingerprint of an agent's certificate the first time it reaches the agent (at
 * admission), stores it in the NATS KV bucket `amf_mcp_pins` (shared by every coordinator on the
 * fabric, kept across restarts), and checks every later TLS connection to the agent against it,
 * SSH-style. The check runs on the connection itself, before any HTTP byte is sent.
 */
import https from 'node:https';
import { isIP } from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import type { KV } from '@nats-io/kv';
import { kvKey } from '../../../fabric/jetstream.js';
import { AmfError } from '../../../errors.js';

/** Policy warning reason (and audit reason) of a certificate that no longer matches its pin. */
export const TLS_PIN_MISMATCH_REASON = 'mcp_tls_pin_mismatch';

/** The pin of one agent, as stored in KV. */
export interface TlsPin {
  agent_id: string;
  /** SHA-256 of the certificate (DER), colon-separated upper-case hex as `openssl x509 -fingerprint -sha256` prints it. */
  fingerprint256: string;
  /** The endpoint the certificate was first seen on. */
  endpoint: string;
  /** ISO time of first use. */
  pinned_at: string;
}

/** Thrown (by the pinned agent's connections) when the peer certificate differs from the pin. */
export class TlsPinMismatchError extends AmfError {
  declare readonly code: typeof TLS_PIN_MISMATCH_REASON;

  constructor(
    readonly agentId: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(
      TLS_PIN_MISMATCH_REASON,
      `TLS certificate of ${agentId} changed: pinned SHA-256 ${expected}, presented ${actual}; call refused (TOFU pin mismatch)`,
    );
    this.name = 'TlsPinMismatchError';
  }
}

/** The pin mismatch behind `err`, however deeply the SDK or fetch wrapped it. */
export function findPinMismatch(err: unknown): TlsPinMismatchError | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && e; depth++) {
    if (e instanceof TlsPinMismatchError) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

const FINGERPRINT = /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/;

function parsePin(value: unknown): TlsPin | undefined {
  const p = value as Partial<TlsPin> | null;
  if (!p || typeof p.agent_id !== 'string' || typeof p.fingerprint256 !== 'string') return undefined;
  if (!FINGERPRINT.test(p.fingerprint256)) return undefined;
  return {
    agent_id: p.agent_id,
    fingerprint256: p.fingerprint256,
    endpoint: String(p.endpoint ?? ''),
    pinned_at: String(p.pinned_at ?? ''),
  };
}

/** The pins in the KV bucket, keyed by agent id. */
export class TlsPinStore {
  constructor(private readonly kv: KV) {}

  /** The pin of `agentId`, if one was recorded (an unreadable entry counts as none). */
  async get(agentId: string): Promise<TlsPin | undefined> {
    const entry = await this.kv.get(kvKey(agentId));
    if (!entry || entry.operation !== 'PUT' || entry.length === 0) return undefined;
    try {
      return parsePin(entry.json());
    } catch {
      return undefined;
    }
  }

  /**
   * Records `pin` unless the agent already has one, and returns the pin in force. First writer wins
   * (KV create is atomic), so two coordinators admitting the same agent agree on one certificate.
   */
  async pinIfAbsent(pin: TlsPin): Promise<TlsPin> {
    const known = await this.get(pin.agent_id);
    if (known) return known;
    try {
      await this.kv.create(kvKey(pin.agent_id), JSON.stringify(pin));
      return pin;
    } catch (err) {
      const raced = await this.get(pin.agent_id);
      if (raced) return raced;
      throw err;
    }
  }

  /**
   * The fingerprint `agentId` is pinned to: the recorded one, else the certificate `endpoint` presents
   * now, recorded as the pin (trust on first use). `onPinned` hears of a new pin.
   */
  async pinOnFirstUse(
    agentId: string,
    endpoint: string,
    onPinned?: (fingerprint256: string) => void,
  ): Promise<string> {
    const known = await this.get(agentId);
    if (known) return known.fingerprint256;
    const fingerprint256 = await probeCertificate(new URL(endpoint));
    const pin = await this.pinIfAbsent({
      agent_id: agentId,
      fingerprint256,
      endpoint,
      pinned_at: new Date().toISOString(),
    });
    if (pin.fingerprint256 === fingerprint256) onPinned?.(fingerprint256);
    return pin.fingerprint256;
  }

  /** Forgets the pin of `agentId` (an operator accepting a new certificate). */
  async remove(agentId: string): Promise<void> {
    await this.kv.delete(kvKey(agentId));
  }
}

function connectOptions(url: URL): tls.ConnectionOptions {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return {
    host,
    port: Number(url.port || 443),
    // SNI takes host names only; trust comes from the pin, so the certificate chain is not verified.
    ...(isIP(host) ? {} : { servername: host }),
    rejectUnauthorized: false,
  };
}

/** Connects once to `url` and returns the SHA-256 fingerprint of the certificate it presents. */
export function probeCertificate(url: URL, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect(connectOptions(url));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new AmfError('TIMEOUT', `TLS handshake with ${url.host} did not finish within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      socket.end();
      if (fingerprint) resolve(fingerprint);
      else reject(new AmfError('UNAVAILABLE', `${url.host} presented no TLS certificate`));
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/**
 * A keep-alive https.Agent whose every new connection must present the pinned certificate: the
 * socket is handed to the HTTP client only after the handshake and the pin check, so a request is
 * never written to an unverified peer. Reused keep-alive sockets were checked when they were opened.
 */
export class PinnedHttpsAgent extends https.Agent {
  constructor(
    private readonly agentId: string,
    private readonly pin: string,
    private readonly onMismatch: (err: TlsPinMismatchError) => void,
  ) {
    super({ keepAlive: true, maxSockets: 64, rejectUnauthorized: false });
  }

  override createConnection(
    options: https.RequestOptions,
    callback?: (err: Error | null, stream: Duplex) => void,
  ): Duplex | null | undefined {
    const socket = tls.connect({ ...(options as tls.ConnectionOptions), rejectUnauthorized: false });
    let done = false;
    const finish = (err: Error | null) => {
      if (done) return;
      done = true;
      callback?.(err, socket);
    };
    socket.once('secureConnect', () => {
      const actual = socket.getPeerCertificate().fingerprint256 ?? '(none)';
      if (actual === this.pin) return finish(null);
      const err = new TlsPinMismatchError(this.agentId, this.pin, actual);
      socket.destroy();
      this.onMismatch(err);
      finish(err);
    });
    socket.once('error', (err) => finish(err));
    // Returning nothing makes the http.Agent wait for the callback (node: _http_agent createSocket).
    return undefined;
  }
}
