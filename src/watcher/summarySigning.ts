/**
 * Watcher output integrity under SPIFFE (seed: "each watcher is issued a short-lived JWT-SVID at
 * spawn and MUST sign its WatcherSummary; the coordinator rejects unsigned output"). Each judged
 * advertisement — each spawn of a disposable watcher — gets its own Ed25519 key, vouched for by a
 * fresh JWT-SVID of the watcher's workload (identity/vouchedSigner.ts), and its summary travels on
 * `amf.internal.classified` as `{"signed_summary": {jws, svid}}`. The coordinator opens it with
 * {@link openClassified}: a plain summary while SPIFFE is active, a bad SVID, a key the SVID does not
 * vouch for or a broken signature are all refusals with their own reason.
 */
import type { IdentityProvider } from '../identity/identityProvider.js';
import {
  isSignedEnvelope,
  unverifiedPayload,
  verifyEnvelope,
  VouchedSigner,
  type SignedEnvelope,
} from '../identity/vouchedSigner.js';
import type { WatcherSummary } from './watcherSummary.js';

/** What goes on `amf.internal.classified` when summaries are signed. */
export interface SignedSummaryMessage {
  signed_summary: SignedEnvelope;
}

/** Signs one summary with a key of its own (one per spawn). */
export type SummarySealer = (summary: WatcherSummary) => Promise<SignedSummaryMessage>;

/** A sealer whose keys are vouched for by `identity`'s JWT-SVIDs, for the coordinator `audience`. */
export function createSummarySealer(identity: IdentityProvider, audience: string): SummarySealer {
  return async (summary) => {
    const signer = await VouchedSigner.create(identity, audience);
    return { signed_summary: await signer.sign(summary) };
  };
}

/** Why a classified message was refused (also the deny reason). */
export type ClassifiedRefusal =
  | 'watcher_output_unsigned'
  | 'watcher_signature_invalid'
  | 'watcher_signer_not_allowed'
  | 'watcher_output_malformed';

export type ClassifiedOpening =
  | { ok: true; summary: unknown; signer?: string }
  | { ok: false; reason: ClassifiedRefusal; message: string; rawId: string | undefined };

/** How the coordinator checks signed summaries. */
export interface SummaryVerification {
  identity: IdentityProvider;
  /** The audience watcher SVIDs must name (the coordinator's SPIFFE ID). */
  audience: string;
  /** Which SPIFFE IDs may sign watcher output. */
  signerAllowed: (spiffeId: string) => boolean;
}

function rawIdOf(value: unknown): string | undefined {
  const id = (value as { raw_id?: unknown } | null)?.raw_id;
  return typeof id === 'string' ? id : undefined;
}

/**
 * Opens a decoded `amf.internal.classified` message. Without `verification` (SPIFFE not active) a
 * plain summary passes as it is; with it only a valid signed summary passes.
 */
export async function openClassified(
  value: unknown,
  verification: SummaryVerification | undefined,
): Promise<ClassifiedOpening> {
  const envelope = (value as Partial<SignedSummaryMessage> | null)?.signed_summary;
  if (!verification) return { ok: true, summary: value };
  if (envelope === undefined)
    return {
      ok: false,
      reason: 'watcher_output_unsigned',
      message: 'the watcher summary is unsigned while SPIFFE is active',
      rawId: rawIdOf(value),
    };
  if (!isSignedEnvelope(envelope))
    return {
      ok: false,
      reason: 'watcher_output_malformed',
      message: 'the signed watcher summary is not {jws, svid}',
      rawId: undefined,
    };
  const check = await verifyEnvelope(
    envelope,
    verification.identity,
    verification.audience,
    verification.signerAllowed,
  );
  if (!check.ok)
    return {
      ok: false,
      reason:
        check.reason === 'signer_not_allowed' ? 'watcher_signer_not_allowed' : 'watcher_signature_invalid',
      message: check.message,
      rawId: rawIdOf(unverifiedPayload(envelope.jws)),
    };
  return { ok: true, summary: check.payload, signer: check.signer };
}
