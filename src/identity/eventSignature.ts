/**
 * Events bound to the key that sent them. Two CloudEvents extension attributes travel with every
 * event an agent sends: `amfsigner` (its nkey public key) and `amfsignature` (Ed25519, base64url).
 * What is signed is the event's canonical form (canonicalJson.ts) — the whole event without
 * `amfsignature` — so neither the envelope nor the payload (`agent_id`, `auth_context.identity`)
 * can be changed without the key.
 *
 * A final result is signed in a split form instead, so that its one signature can travel with the
 * answer when a coordinator relays it: the signed text is `amf.result.final\n` + the SHA-256 of the
 * canonical envelope (everything but the payload and the signature attributes) + `.` + the SHA-256
 * of the canonical payload. Still one Ed25519 signature over the whole event; a relaying coordinator
 * copies the signer, the signature and the envelope digest (`amfresultsigner`, `amfresultsig`,
 * `amfresultenv`) onto the canonical final it publishes, and any reader can check that the worker's
 * key signed exactly this payload.
 */
import * as nodeCrypto from 'node:crypto';
import type { AgentKey } from './agentKey.js';
import { canonicalJson, canonicalJsonOmitting } from './canonicalJson.js';
import { isNkeyUser, publicKeyObject, userPublicKey } from './nkeyPublic.js';
import { ed25519 } from './ed25519.js';

export { canonicalJson };

/** Extension attribute holding the signer's nkey public key. */
export const SIGNER_ATTRIBUTE = 'amfsigner';
/** Extension attribute holding the signature. */
export const SIGNATURE_ATTRIBUTE = 'amfsignature';
/** On a relayed final: the worker's key, its signature and the digest of its envelope. */
export const RESULT_SIGNER_ATTRIBUTE = 'amfresultsigner';
export const RESULT_SIGNATURE_ATTRIBUTE = 'amfresultsig';
export const RESULT_ENVELOPE_ATTRIBUTE = 'amfresultenv';
const RESULT_ATTRIBUTES = [RESULT_SIGNER_ATTRIBUTE, RESULT_SIGNATURE_ATTRIBUTE, RESULT_ENVELOPE_ATTRIBUTE];
const FINAL_TYPE = 'amf.result.final';
const FINAL_DOMAIN = `${FINAL_TYPE}\n`;

/** An Ed25519 signature is 64 bytes: 86 base64url characters; a SHA-256 digest 43. */
const SIGNATURE_PATTERN = /^[A-Za-z0-9_-]{86}$/;
const DIGEST_PATTERN = /^[A-Za-z0-9_-]{43}$/;

const SIGNATURE_ONLY: ReadonlySet<string> = new Set([SIGNATURE_ATTRIBUTE]);
const ENVELOPE_OMITS: ReadonlySet<string> = new Set([SIGNATURE_ATTRIBUTE, ...RESULT_ATTRIBUTES]);
const PAYLOAD_ONLY = { key: 'data', omit: new Set(['payload']) } as const;

/** Node ≥ 20.12 has a one-shot hash, a few times cheaper than createHash for short texts. */
const oneShotHash = (
  nodeCrypto as { hash?: (algorithm: string, data: string, encoding: 'base64url') => string }
).hash;

function digest(text: string): string {
  return oneShotHash
    ? oneShotHash('sha256', text, 'base64url')
    : nodeCrypto.createHash('sha256').update(text).digest('base64url');
}

function isFinal(event: object): boolean {
  return (event as { type?: unknown }).type === FINAL_TYPE;
}

/** The digest of a final's envelope: the event without its payload and signature attributes. */
export function envelopeDigest(event: object): string {
  return digest(canonicalJsonOmitting(event as Record<string, unknown>, ENVELOPE_OMITS, PAYLOAD_ONLY));
}

function finalText(envelope: string, payload: unknown): string {
  return `${FINAL_DOMAIN}${envelope}.${digest(canonicalJson(payload ?? null))}`;
}

/** The text that is signed: a final's split form, else the event without its signature, canonical. */
export function signedText(event: object): string {
  if (isFinal(event))
    return finalText(envelopeDigest(event), (event as { data?: { payload?: unknown } }).data?.payload);
  return canonicalJsonOmitting(event as Record<string, unknown>, SIGNATURE_ONLY);
}

/**
 * Freshness of signed events (docs/security.md, "Every event is fresh"): each signature also covers
 * `amfepoch`, the run of the key that made it (a decimal string of milliseconds since the Unix epoch
 * at the key's first signature in this process, larger than any earlier run's as long as the clock
 * does not go back), and `amfseq`, a counter of that run's signatures (a CloudEvents Integer). With
 * the event's `time`, a reader can refuse what it has seen before and what an earlier run of the
 * same key said (a replayed goodbye, an old heartbeat): coordinator/tasks/eventFreshness.ts.
 */
export const EPOCH_ATTRIBUTE = 'amfepoch';
export const SEQUENCE_ATTRIBUTE = 'amfseq';
/** The largest `amfseq` (CloudEvents Integer); a run that reaches it starts a new epoch. */
export const MAX_SEQUENCE = 2_147_483_647;

/** This process's run of each key: its epoch and the last sequence number it signed. */
const runs = new Map<string, { epoch: number; seq: number }>();
let lastEpoch = 0;

function newEpoch(): number {
  lastEpoch = Math.max(Date.now(), lastEpoch + 1);
  return lastEpoch;
}

/**
 * Stamps `event` with the next `amfepoch`/`amfseq` of `publicKey` (in place; returns it). Done by
 * {@link signEvent}; exported for signers that sign by other means (tests that sign "elsewhere").
 */
export function stampFreshness<E extends object>(event: E, publicKey: string): E {
  let run = runs.get(publicKey);
  if (run === undefined || run.seq >= MAX_SEQUENCE) {
    run = { epoch: newEpoch(), seq: -1 };
    runs.set(publicKey, run);
  }
  run.seq += 1;
  const target = event as Record<string, unknown>;
  target[EPOCH_ATTRIBUTE] = String(run.epoch);
  target[SEQUENCE_ATTRIBUTE] = run.seq;
  return event;
}

/**
 * Stamps `event` with the signer, a fresh `amfepoch`/`amfseq` and the signature (in place; returns
 * it). Every call is a new statement of the key: signing the same object twice gives two events.
 */
export function signEvent<E extends object>(event: E, key: AgentKey): E {
  const target = event as Record<string, unknown>;
  delete target[SIGNATURE_ATTRIBUTE];
  target[SIGNER_ATTRIBUTE] = key.publicKey;
  stampFreshness(event, key.publicKey);
  const text = signedText(event);
  const signature = key.sign(Buffer.from(text));
  target[SIGNATURE_ATTRIBUTE] = signature;
  rememberOwn(signature, key.publicKey, text);
  return event;
}

/**
 * Makes a final carry its own relay-ready result signature (the same one {@link signEvent} makes):
 * for a final that is published without an event signature of its own.
 */
export function signResult<E extends object>(event: E, key: AgentKey): E {
  const target = event as Record<string, unknown>;
  const envelope = envelopeDigest(event);
  target[RESULT_SIGNER_ATTRIBUTE] = key.publicKey;
  target[RESULT_ENVELOPE_ATTRIBUTE] = envelope;
  const text = finalText(envelope, (event as { data?: { payload?: unknown } }).data?.payload);
  const signature = key.sign(Buffer.from(text));
  target[RESULT_SIGNATURE_ATTRIBUTE] = signature;
  rememberOwn(signature, key.publicKey, text);
  return event;
}

/**
 * The envelope digest of each final whose signature verified, for {@link carryResultSignature}:
 * relaying the final needs exactly the digest the worker signed, so it is not computed again.
 */
const verifiedEnvelopes = new WeakMap<object, string>();

/**
 * Puts the worker's signature onto a relayed final (its payload must be the same): derived from the
 * worker's event signature, or copied when `from` is itself a relayed final.
 */
export function carryResultSignature<E extends object>(from: object, to: E): E {
  const source = from as Record<string, unknown>;
  const target = to as Record<string, unknown>;
  if (typeof source[SIGNATURE_ATTRIBUTE] === 'string' && source.amfagentrole !== 'coordinator') {
    target[RESULT_SIGNER_ATTRIBUTE] = source[SIGNER_ATTRIBUTE];
    target[RESULT_SIGNATURE_ATTRIBUTE] = source[SIGNATURE_ATTRIBUTE];
    target[RESULT_ENVELOPE_ATTRIBUTE] = verifiedEnvelopes.get(from) ?? envelopeDigest(from);
    return to;
  }
  for (const attribute of RESULT_ATTRIBUTES) {
    const value = source[attribute];
    if (typeof value === 'string') target[attribute] = value;
  }
  return to;
}

/** Checks the worker's signature on a (possibly relayed) final against the key it names. */
export function checkResultSignature(event: object): SignatureCheck {
  const request = resultSignatureRequest(event);
  return 'ok' in request ? request : checkSignature(request);
}

/**
 * As {@link checkResultSignature}, with Ed25519 run in libuv's thread pool: only the text is built
 * on the calling thread. A check that needs no Ed25519 (unsigned, malformed, already verified) is
 * answered at once, not as a promise.
 */
export function checkResultSignatureAsync(event: object): SignatureCheck | Promise<SignatureCheck> {
  const request = resultSignatureRequest(event);
  return 'ok' in request ? request : checkSignatureAsync(request);
}

function resultSignatureRequest(event: object): SignatureCheck | SignatureRequest {
  const e = event as Record<string, unknown> & { data?: { payload?: unknown } };
  const signer = e[RESULT_SIGNER_ATTRIBUTE];
  const signature = e[RESULT_SIGNATURE_ATTRIBUTE];
  const envelope = e[RESULT_ENVELOPE_ATTRIBUTE];
  if (signer === undefined && signature === undefined) return { ok: false, reason: 'unsigned' };
  if (!isFinal(event) || typeof envelope !== 'string' || !DIGEST_PATTERN.test(envelope))
    return {
      ok: false,
      reason: 'malformed_signature',
      ...(typeof signer === 'string' ? { signer: signer.slice(0, 64) } : {}),
    };
  return { signer, signature, text: () => finalText(envelope, e.data?.payload) };
}

/** What a signature check found. */
export type SignatureCheck =
  | { ok: true; signer: string }
  | { ok: false; reason: 'unsigned' | 'malformed_signature' | 'bad_signature'; signer?: string };

/**
 * Checks the event's signature against the key it names (`amfsigner`). Whether that key is the one
 * bound to the agent the event speaks for is the caller's question (see the coordinator's
 * coordinator/tasks/eventAuthenticity.ts); this only says whether the named key really signed these
 * bytes.
 */
export function checkEventSignature(event: object): SignatureCheck {
  const { request, verified } = eventSignatureRequest(event);
  const check = checkSignature(request);
  verified(check);
  return check;
}

/**
 * As {@link checkEventSignature}, with Ed25519 run in libuv's thread pool (the costliest step of the
 * coordinator's task path, now off its event loop); answered at once when no Ed25519 is needed.
 */
export function checkEventSignatureAsync(event: object): SignatureCheck | Promise<SignatureCheck> {
  const { request, verified } = eventSignatureRequest(event);
  const check = checkSignatureAsync(request);
  if (!isFinal(event)) return check; // nothing to remember: copies in flight share one promise
  if (!(check instanceof Promise)) {
    verified(check);
    return check;
  }
  return check.then((result) => {
    verified(result);
    return result;
  });
}

/** What to check for `event`, and what to remember once it verified (a final's envelope digest). */
function eventSignatureRequest(event: object): {
  request: SignatureRequest;
  verified: (check: SignatureCheck) => void;
} {
  const e = event as Record<string, unknown>;
  if (!isFinal(event))
    return {
      request: {
        signer: e[SIGNER_ATTRIBUTE],
        signature: e[SIGNATURE_ATTRIBUTE],
        text: () => signedText(event),
      },
      verified: () => undefined,
    };
  let envelope = '';
  return {
    request: {
      signer: e[SIGNER_ATTRIBUTE],
      signature: e[SIGNATURE_ATTRIBUTE],
      text: () => {
        envelope = envelopeDigest(event);
        return finalText(envelope, (event as { data?: { payload?: unknown } }).data?.payload);
      },
    },
    verified: (check) => {
      if (check.ok && envelope !== '') verifiedEnvelopes.set(event, envelope);
    },
  };
}

/**
 * Signatures already verified (or made here, see below), with the key and text they hold for. An
 * event often arrives twice (a worker publishes claim and progress on the canonical subject and on
 * the task's reply subject): the second copy costs a comparison of texts, not another Ed25519
 * verification (the costliest step of the task path). A hit needs the same signature, key and
 * signed text, so nothing that did not verify (or was not signed here) is believed; Ed25519
 * signatures are deterministic, and a different text under the same signature is verified afresh.
 */
const verified = new Map<string, { signer: string; text: string }>();
const VERIFIED_LIMIT = 1024;

/**
 * Whether this process checks signatures (a coordinator runs here). Only then are the signatures
 * it makes itself remembered: an agent in the coordinator's process (`amf up --demo`'s workers)
 * signs its claim and final here, and the coordinator's check of those exact bytes is then a
 * comparison, not an Ed25519 verification — the signature was made here with the signer's private
 * key, so it is known to be valid for that text. A copy whose text differs in any byte is verified
 * afresh, as is every event from another process. A process that never checks (a worker on its
 * own) keeps nothing.
 */
let checksSignaturesHere = false;

function rememberOwn(signature: string, signer: string, text: string): void {
  if (checksSignaturesHere) remember(signature, signer, text);
}

function remember(signature: string, signer: string, text: string): void {
  if (verified.size >= VERIFIED_LIMIT) {
    const oldest = verified.keys().next().value;
    if (oldest !== undefined) verified.delete(oldest);
  }
  verified.set(signature, { signer, text });
}

/** A signature to check: the claimed signer and signature (unchecked input) and the signed text. */
interface SignatureRequest {
  signer: unknown;
  signature: unknown;
  text: () => string;
}

/** What is decided before any Ed25519: unsigned or malformed, else the text that has to verify. */
type Prepared = { done: SignatureCheck } | { signer: string; signature: string; text: string };

function prepare({ signer, signature, text }: SignatureRequest): Prepared {
  if (signer === undefined && signature === undefined) return { done: { ok: false, reason: 'unsigned' } };
  if (
    typeof signer !== 'string' ||
    !isNkeyUser(signer) ||
    typeof signature !== 'string' ||
    !SIGNATURE_PATTERN.test(signature)
  )
    return {
      done: {
        ok: false,
        reason: 'malformed_signature',
        ...(typeof signer === 'string' ? { signer: signer.slice(0, 64) } : {}),
      },
    };
  checksSignaturesHere = true;
  const signed = text();
  const seen = verified.get(signature);
  if (seen !== undefined && seen.signer === signer && seen.text === signed)
    return { done: { ok: true, signer } };
  return { signer, signature, text: signed };
}

function conclude(
  valid: boolean,
  { signer, signature, text }: Exclude<Prepared, { done: SignatureCheck }>,
): SignatureCheck {
  if (!valid) return { ok: false, reason: 'bad_signature', signer };
  remember(signature, signer, text);
  return { ok: true, signer };
}

/** One check for both signatures: well-formed signer and signature, then Ed25519 over the text. */
function checkSignature(request: SignatureRequest): SignatureCheck {
  const prepared = prepare(request);
  if ('done' in prepared) return prepared.done;
  return conclude(
    ed25519.verify(
      userPublicKey(prepared.signer),
      Buffer.from(prepared.text),
      Buffer.from(prepared.signature, 'base64url'),
    ),
    prepared,
  );
}

/**
 * Verifications running in the thread pool, by signature: the second copy of an event that arrives
 * while the first is still being verified waits for the same result instead of verifying again.
 */
const inFlight = new Map<string, { signer: string; text: string; result: Promise<SignatureCheck> }>();

function checkSignatureAsync(request: SignatureRequest): SignatureCheck | Promise<SignatureCheck> {
  const prepared = prepare(request);
  if ('done' in prepared) return prepared.done;
  const running = inFlight.get(prepared.signature);
  if (running !== undefined && running.signer === prepared.signer && running.text === prepared.text)
    return running.result;
  const result = new Promise<SignatureCheck>((resolve) => {
    const done = (valid: boolean) => {
      if (inFlight.get(prepared.signature)?.result === result) inFlight.delete(prepared.signature);
      resolve(conclude(valid, prepared));
    };
    try {
      nodeCrypto.verify(
        null,
        Buffer.from(prepared.text),
        publicKeyObject(prepared.signer),
        Buffer.from(prepared.signature, 'base64url'),
        (err, valid) => done(err === null && valid),
      );
    } catch {
      // Never a rejection: whoever waits on this check must get a verdict.
      queueMicrotask(() => done(false));
    }
  });
  // Another text under the same signature is verified on its own and does not replace the first.
  if (running === undefined)
    inFlight.set(prepared.signature, { signer: prepared.signer, text: prepared.text, result });
  return result;
}
