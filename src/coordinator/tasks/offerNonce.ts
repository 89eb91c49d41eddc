/**
 * A claim counts only for an offer its claimant received. Every announcement a coordinator offers on
 * the work queue gets a fresh nonce, carried only in the work-queue message (a header, never the
 * announcement's body that observers see); the announcement carries its SHA-256 (`offer_digest`).
 * The worker that takes the message echoes the nonce in its claim and its final, and every
 * coordinator that follows the task (the announcing one, its peers, an adopter) checks the echo
 * against the digest, with nothing to share but the announcement.
 *
 * So a worker made to run a task under a mesh task's id by some other way in (a direct call) cannot
 * claim that task, nor can an agent that read the id from the event history: neither holds the
 * nonce. The check costs one SHA-256 of 36 bytes per claim.
 */
import * as nodeCrypto from 'node:crypto';
import type { AmfEvent } from '../../events/cloudEvent.js';
import { RESULT_SIGNER_ATTRIBUTE, SIGNER_ATTRIBUTE } from '../../identity/eventSignature.js';
import type { TaskRecord } from './record.js';

/** Node ≥ 20.12 has a one-shot hash, a few times cheaper than createHash for short texts. */
const oneShotHash = (
  nodeCrypto as { hash?: (algorithm: string, data: string, encoding: 'base64url') => string }
).hash;

/** A new offer nonce (122 random bits). */
export function newOfferNonce(): string {
  return nodeCrypto.randomUUID();
}

/** The digest an announcement carries for `nonce`. */
export function offerDigest(nonce: string): string {
  return oneShotHash
    ? oneShotHash('sha256', nonce, 'base64url')
    : nodeCrypto.createHash('sha256').update(nonce).digest('base64url');
}

/**
 * True when `event` (a claim, or a final standing in for one) may take `task`: the announcement was
 * offered with no nonce (a lifecycle without work queue), the event names the nonce, or it is an
 * unsigned event of a keyless seed-style agent, which took the task from the core announce subject
 * and is let in only in legacy mode (eventAuthenticity.ts refuses it otherwise, before this check).
 * A final relayed in a coordinator's name counts as signed when it carries a worker's result
 * signature: an agent cannot pass off its own final as a relayed one to skip the nonce.
 */
export function namesOffer(task: TaskRecord, event: AmfEvent): boolean {
  const digest = task.announce.data.payload.offer_digest;
  if (digest === undefined) return true;
  const offer = (event.data.payload as { offer?: unknown }).offer;
  if (typeof offer === 'string' && offer.length <= 64) return offerDigest(offer) === digest;
  const attributes = event as unknown as Record<string, unknown>;
  return attributes[SIGNER_ATTRIBUTE] === undefined && attributes[RESULT_SIGNER_ATTRIBUTE] === undefined;
}
