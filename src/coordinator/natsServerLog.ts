/**
 * What the spawned nats-server says in its own log, which the coordinator used to drop: its errors
 * and warnings go to the coordinator's log at their level (the same line repeated within a minute is
 * counted, not repeated), and the store's troubles (a full disk, a corrupt block) are kept so that
 * `/health` and `amf doctor` can name them. Lines look like `[pid] 2026/11/28 18:00:00.000000 [ERR] …`.
 */
import type { LogFn } from '../log.js';
import type { StoreLoss } from './storeIntegrity.js';

/** What `/health` shows of the store. */
export interface StoreHealth {
  /** `full`: out of space or over its limits; `corrupt`: a damaged block was found; else `ok`. */
  state: 'ok' | 'full' | 'corrupt';
  /** The server's own line, when not ok. */
  detail?: string;
  /** When it was last seen (ISO). */
  at?: string;
  /** Stored messages found lost (storeIntegrity.ts): what, how many, which tasks could be affected. */
  losses?: StoreLoss[];
  /** The server's own line, when `detail` describes the losses instead. */
  server_detail?: string;
}

const LEVEL = /\[(ERR|WRN|INF|DBG|TRC|FTL)\]\s+(.*)$/;
const FULL =
  /insufficient storage|no space left|resource limits exceeded|maximum bytes exceeded|disk full|storage .*exceeded/i;
const CORRUPT = /corrupt|bad checksum|checksum mismatch|invalid (block|index)|lost data|missing.*msgs?/i;
const ROUTINE = /authentication error|Plaintext passwords detected/;
/** A trouble not seen again for this long is over. */
const STALE_MS = 15_000;
const REPEAT_MS = 60_000;

export class NatsServerLog {
  private store: { state: StoreHealth['state']; detail: string; at: number } | undefined;
  private readonly repeats = new Map<string, { first: number; count: number }>();

  constructor(
    private readonly log: LogFn,
    private readonly now: () => number = Date.now,
  ) {}

  /** Takes one line of the server's output. */
  line(text: string): void {
    const match = LEVEL.exec(text);
    if (!match) return;
    const [, level, message] = match as unknown as [string, string, string];
    if (level !== 'ERR' && level !== 'WRN' && level !== 'FTL') return;
    // Routine for this mesh, not trouble: an agent dials its own user until its grant lands (joinFabric),
    // and the role users' passwords are generated secrets in a 0600 file.
    if (ROUTINE.test(message)) {
      this.log('debug', `nats-server: ${message}`, { nats_server: true });
      return;
    }
    const now = this.now();
    if (FULL.test(message)) this.store = { state: 'full', detail: message, at: now };
    else if (CORRUPT.test(message)) this.store = { state: 'corrupt', detail: message, at: now };
    const seen = this.repeats.get(message);
    if (seen && now - seen.first < REPEAT_MS) {
      seen.count++;
      return;
    }
    if (this.repeats.size > 1000) this.repeats.clear();
    const repeated = seen && seen.count > 1 ? { repeated: seen.count } : {};
    this.repeats.set(message, { first: now, count: 1 });
    this.log(level === 'WRN' ? 'warn' : 'error', `nats-server: ${message}`, {
      nats_server: true,
      ...repeated,
    });
  }

  /** The store as the server last reported it (ok once a trouble is a minute old). */
  storeHealth(): StoreHealth {
    const s = this.store;
    if (!s || (s.state === 'full' && this.now() - s.at > STALE_MS)) return { state: 'ok' };
    return { state: s.state, detail: s.detail, at: new Date(s.at).toISOString() };
  }
}
