/** What counts as the same advertisement again: a hash of what it says, liveness aside. */
import { createHash } from 'node:crypto';

/** Hash of what an advertisement says (order of keys does not matter). */
export function advertisementHash(txt: Record<string, string>): string {
  const h = createHash('sha256');
  for (const key of Object.keys(txt).sort()) {
    // `status` changes (active → draining) are liveness, not a new advertisement to judge.
    if (key === 'status') continue;
    h.update(key).update('\u0000').update(txt[key]!).update('\u0001');
  }
  return h.digest('base64url');
}
