// The bounds of the HTTP interfaces: the session store (order within a session, per-session queue,
// global cap, LRU eviction and idle expiry telling the agent to forget), session ids, and interface
// paths that would shadow built-in routes.
import { describe, expect, it } from 'vitest';
import { parseSessionId, SessionStore } from '../../src/afm/interfaces/sessionStore.js';
import { createAgentInterfaces } from '../../src/afm/interfaces/agentInterfaces.js';
import { AmfError } from '../../src/errors.js';
import { afm, recordingResponder, serveAgent } from './interfacesKit.js';

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const codeOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return (err as AmfError).code;
  }
  return undefined;
};

describe('SessionStore', () => {
  it('runs the turns of one session in order and other sessions alongside', async () => {
    const store = new SessionStore();
    const log: string[] = [];
    const gate = deferred();
    const a1 = store.run('a', async () => {
      log.push('a1 start');
      await gate.promise;
      log.push('a1 end');
    });
    const a2 = store.run('a', async () => void log.push('a2'));
    await store.run('b', async () => void log.push('b1'));
    expect(log).toEqual(['a1 start', 'b1']); // b did not wait for a; a2 waits for a1
    gate.resolve();
    await Promise.all([a1, a2]);
    expect(log).toEqual(['a1 start', 'b1', 'a1 end', 'a2']);
  });

  it('refuses more queued turns per session (429) and more active turns overall (503)', async () => {
    const gate = deferred();
    const store = new SessionStore({ maxQueuedTurns: 2, maxActiveTurns: 3 });
    const held = [store.run('s', () => gate.promise), store.run('s', () => gate.promise)];
    await expect(store.run('s', () => gate.promise)).rejects.toMatchObject({ code: 'RATE_LIMITED' });
    held.push(store.run('t', () => gate.promise));
    await expect(store.run('u', () => gate.promise)).rejects.toMatchObject({ code: 'OVERLOADED' });
    gate.resolve();
    await Promise.all(held);
    await expect(store.run('u', async () => 'ok')).resolves.toBe('ok');
  });

  it('evicts the least recently used idle session past maxSessions, and expires idle ones', async () => {
    let now = 0;
    const evicted: string[] = [];
    const store = new SessionStore({
      maxSessions: 2,
      idleMs: 1000,
      now: () => now,
      onEvict: (k) => evicted.push(k),
    });
    await store.run('a', async () => undefined);
    await store.run('b', async () => undefined);
    await store.run('a', async () => undefined); // a is now the most recent
    await store.run('c', async () => undefined);
    expect(evicted).toEqual(['b']);
    expect(store.size).toBe(2);
    now = 5000;
    await store.run('d', async () => undefined);
    expect(evicted.sort()).toEqual(['a', 'b', 'c']);
    expect(store.size).toBe(1);
  });

  it('a failed turn does not block the next one of the same session', async () => {
    const store = new SessionStore();
    await expect(store.run('s', () => Promise.reject(new Error('model down')))).rejects.toThrow('model down');
    await expect(store.run('s', async () => 'next')).resolves.toBe('next');
  });
});

describe('session ids and paths', () => {
  it('accepts short ids of safe characters only', () => {
    expect(parseSessionId(undefined)).toBe('default');
    expect(parseSessionId('user-42@team:chat.1')).toBe('user-42@team:chat.1');
    expect(codeOf(() => parseSessionId('x'.repeat(129)))).toBe('INVALID_REQUEST');
    expect(codeOf(() => parseSessionId('a b'))).toBe('INVALID_REQUEST');
    expect(codeOf(() => parseSessionId('a\nb'))).toBe('INVALID_REQUEST');
  });

  it('refuses interface paths that shadow built-in routes or each other', () => {
    const make = (front: string) => () =>
      createAgentInterfaces({ definition: afm(front), responder: recordingResponder(), baseUrl: () => '' });
    // The parser already refuses the worker's own paths; the interfaces refuse them too.
    expect(make('interfaces:\n  - type: webchat\n    exposure: { http: { path: /mcp } }')).toThrow(/\/mcp/);
    expect(make('interfaces:\n  - type: webhook\n    exposure: { http: { path: /.well-known/x } }')).toThrow(
      /well-known/,
    );
    expect(() =>
      make(
        'interfaces:\n  - type: webchat\n    exposure: { http: { path: /a } }\n  - type: webhook\n    exposure: { http: { path: /a/ui } }',
      )(),
    ).toThrow(/"\/a\/ui" is also the webchat page path/);
    expect(codeOf(make('interfaces:\n  - type: webchat\n  - type: webhook'))).toBeUndefined();
  });

  it('webchat answers 429 when a session already has its turns queued', async () => {
    const gate = deferred();
    const responder = recordingResponder();
    const slow = {
      ...responder,
      respond: async (req: Parameters<typeof responder.respond>[0]) => (
        await gate.promise,
        responder.respond(req)
      ),
    };
    const agent = await serveAgent(afm('interfaces:\n  - type: webchat'), slow);
    try {
      const post = () =>
        fetch(`${agent.url}/chat`, { method: 'POST', body: 'hi', headers: { 'x-session-id': 'busy' } });
      const held = [1, 2, 3, 4].map(post);
      await expect.poll(() => agent.interfaces.sessions.activeTurns).toBe(4);
      // The fifth turn of the same session is refused while four are in progress.
      const fifth = await post();
      expect(fifth.status).toBe(429);
      expect(((await fifth.json()) as { error: { code: string } }).error.code).toBe('RATE_LIMITED');
      gate.resolve();
      expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200, 200, 200]);
    } finally {
      gate.resolve();
      await agent.close();
    }
  });
});
