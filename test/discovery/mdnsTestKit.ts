// Shared by the mDNS tests: the namespace guard, unique names and polling without sleeps.
import { randomBytes } from 'node:crypto';
import { networkInterfaces } from 'node:os';

/**
 * True only inside a private network namespace whose one interface is loopback (scripts/test.sh runs
 * the suite that way). Anywhere else the mDNS tests skip: they must never multicast on a real network.
 */
export function onlyLoopback(): boolean {
  const interfaces = Object.values(networkInterfaces()).flatMap((list) => list ?? []);
  return interfaces.length > 0 && interfaces.every((entry) => entry.internal);
}

/** An instance name no other test file in the same namespace will use. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

/**
 * Polls `probe` until it returns a value (not undefined) or the deadline passes. `what` may be a
 * function so that a failure message shows the state at the deadline (e.g. a peer's output so far).
 */
export async function waitFor<T>(
  probe: () => T | undefined,
  what: string | (() => string),
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
