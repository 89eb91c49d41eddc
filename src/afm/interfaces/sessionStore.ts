/**
 * Chat sessions of the HTTP interfaces, keyed by the client's `X-Session-Id`. The store is bounded
 * (least recently used sessions are evicted, idle ones expire) because clients choose the ids, and it
 * runs the turns of one session one after another so a conversation's history stays in order.
 */
import { AmfError } from '../../errors.js';

const SESSION_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

/** Checks a client-chosen session id (absent → "default"). */
export function parseSessionId(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value === '') return 'default';
  if (!SESSION_ID.test(value))
    throw new AmfError(
      'INVALID_REQUEST',
      'invalid X-Session-Id: expected 1-128 characters of letters, digits and . _ : @ -',
    );
  return value;
}

export interface SessionStoreOptions {
  maxSessions?: number;
  idleMs?: number;
  /** Turns that may wait behind a running one in the same session before 429. */
  maxQueuedTurns?: number;
  /** Turns running or queued over all sessions before 503 (each may hold a model call). */
  maxActiveTurns?: number;
  /** Called with the session key when a session is evicted or expires (the agent forgets it). */
  onEvict?: (key: string) => void;
  now?: () => number;
}

interface Session {
  lastUsed: number;
  /** The tail of this session's turn queue. */
  tail: Promise<unknown>;
  queued: number;
}

/** Bounded, serialising session store. */
export class SessionStore {
  private readonly sessions = new Map<string, Session>();
  private readonly maxSessions: number;
  private readonly idleMs: number;
  private readonly maxQueued: number;
  private readonly maxActive: number;
  private active = 0;
  private readonly now: () => number;

  constructor(private readonly opts: SessionStoreOptions = {}) {
    this.maxSessions = opts.maxSessions ?? 1000;
    this.idleMs = opts.idleMs ?? 30 * 60_000;
    this.maxQueued = opts.maxQueuedTurns ?? 4;
    this.maxActive = opts.maxActiveTurns ?? 64;
    this.now = opts.now ?? Date.now;
  }

  get size(): number {
    return this.sessions.size;
  }

  /** Turns running or waiting, over all sessions. */
  get activeTurns(): number {
    return this.active;
  }

  /** Runs `turn` in session `key` after the session's earlier turns have finished. */
  async run<T>(key: string, turn: () => Promise<T>): Promise<T> {
    this.expireIdle();
    if (this.active >= this.maxActive)
      throw new AmfError('OVERLOADED', `the agent is answering ${this.active} turns already; retry shortly`);
    let session = this.sessions.get(key);
    if (session)
      this.sessions.delete(key); // re-insert: Map order is the LRU order
    else session = { lastUsed: this.now(), tail: Promise.resolve(), queued: 0 };
    if (session.queued >= this.maxQueued) {
      this.sessions.set(key, session);
      throw new AmfError(
        'RATE_LIMITED',
        `session has ${session.queued} turns in progress; wait for an answer before sending more`,
      );
    }
    session.lastUsed = this.now();
    session.queued++;
    this.active++;
    this.sessions.set(key, session);
    this.evictOverflow();
    const current = session;
    const result = current.tail.then(turn);
    current.tail = result.catch(() => undefined);
    try {
      return await result;
    } finally {
      current.queued--;
      this.active--;
      current.lastUsed = this.now();
    }
  }

  private expireIdle(): void {
    const cutoff = this.now() - this.idleMs;
    for (const [key, s] of this.sessions) {
      if (s.lastUsed > cutoff) break; // LRU order: the rest are newer
      if (s.queued > 0) continue;
      this.sessions.delete(key);
      this.opts.onEvict?.(key);
    }
  }

  private evictOverflow(): void {
    if (this.sessions.size <= this.maxSessions) return;
    for (const [key, s] of this.sessions) {
      if (this.sessions.size <= this.maxSessions) break;
      if (s.queued > 0) continue; // a running conversation is never dropped mid-turn
      this.sessions.delete(key);
      this.opts.onEvict?.(key);
    }
  }
}
