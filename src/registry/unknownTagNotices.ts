/**
 * Requests the coordinator refused because no agent serves what they asked for (`amf/<tag>` models,
 * A2A messages routed to a tag nobody serves). Each refusal becomes an `amf.policy.warning` with
 * reason `no_agent_for_tag` (an existing reason code), so the console's Events and Policy views and
 * any fabric subscriber see it. A client looping on a wrong model must not flood the fabric: at most
 * `perWindow` warnings go out per window, and the next one says how many were left out.
 */
import type { PolicyNotices } from './policyNotices.js';

export interface UnknownTagRefusal {
  /** The door the request came through: `openai`, `a2a`. */
  protocol: string;
  /** What the request named (the model, the tag), cut to a readable length. */
  requested: string;
  /** The error the requester got. */
  message: string;
}

const MAX_REQUESTED_CHARS = 200;
const MAX_MESSAGE_CHARS = 500;

export class UnknownTagNotices {
  private windowStart = 0;
  private sentInWindow = 0;
  private suppressed = 0;

  constructor(
    private readonly notices: Pick<PolicyNotices, 'warn'>,
    private readonly perWindow = 20,
    private readonly windowMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Records one refusal: a warning on the fabric unless the window's budget is spent. */
  refused(refusal: UnknownTagRefusal): void {
    const t = this.now();
    if (t - this.windowStart >= this.windowMs) {
      this.windowStart = t;
      this.sentInWindow = 0;
    }
    if (this.sentInWindow >= this.perWindow) {
      this.suppressed += 1;
      return;
    }
    this.sentInWindow += 1;
    const requested = refusal.requested.slice(0, MAX_REQUESTED_CHARS);
    const details: Record<string, unknown> = { protocol: refusal.protocol, requested };
    if (this.suppressed > 0) details.suppressed_before = this.suppressed;
    this.suppressed = 0;
    this.notices.warn({
      reason: 'no_agent_for_tag',
      message: `${refusal.protocol} request for ${requested} refused: ${refusal.message.slice(0, MAX_MESSAGE_CHARS)}`,
      details,
    });
  }
}
