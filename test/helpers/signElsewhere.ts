// Events signed as an agent in another process signs them. The verifier believes, without
// Ed25519, what its own process signed (eventSignature.ts); tests of the verification itself (the
// thread pool, arrival order, a verification per copy) need signatures it has not seen made.
import type { AgentKey } from '../../src/identity/agentKey.js';
import {
  SIGNATURE_ATTRIBUTE,
  SIGNER_ATTRIBUTE,
  signedText,
  stampFreshness,
} from '../../src/identity/eventSignature.js';

/**
 * Stamps `event` with `key`'s signer, a fresh `amfepoch`/`amfseq` (as every signer does) and the
 * signature (in place; returns it), unseen by the verifier.
 */
export function signElsewhere<E extends object>(event: E, key: AgentKey): E {
  const target = event as Record<string, unknown>;
  delete target[SIGNATURE_ATTRIBUTE];
  target[SIGNER_ATTRIBUTE] = key.publicKey;
  stampFreshness(event, key.publicKey);
  target[SIGNATURE_ATTRIBUTE] = key.sign(Buffer.from(signedText(event)));
  return event;
}
