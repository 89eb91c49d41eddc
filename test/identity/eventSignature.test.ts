// The agent's key and event signatures: a key file is private and stable, the canonical form does
// not depend on key order, and any change to a signed event (payload, identity, signer) breaks it.
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createEvent } from '../../src/events/cloudEvent.js';
import { validateEvent } from '../../src/events/validateEvent.js';
import { createEphemeralAgentKey, loadOrCreateAgentKey } from '../../src/identity/agentKey.js';
import {
  canonicalJson,
  carryResultSignature,
  checkEventSignature,
  checkEventSignatureAsync,
  checkResultSignature,
  checkResultSignatureAsync,
  signEvent,
  signResult,
} from '../../src/identity/eventSignature.js';
import { isNkeyUser } from '../../src/identity/nkeyPublic.js';
import { signElsewhere } from '../helpers/signElsewhere.js';

const sender = {
  identity: 'spiffe://local/worker/a',
  source: 'http://127.0.0.1:1',
  role: 'specialist' as const,
  trustDomain: 'local',
};
const final = () =>
  createEvent({
    type: 'amf.result.final',
    sender,
    payload: {
      task_id: '6f1c9c1e-3b7e-4c55-9d43-0f5b8a9e1a11',
      agent_id: sender.identity,
      status: 'completed',
      result: { text: 'hi' },
    },
    taskId: '6f1c9c1e-3b7e-4c55-9d43-0f5b8a9e1a11',
  });

describe('agent key', () => {
  const dirs: string[] = [];
  afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

  it('is created once, 0600 in a 0700 directory, and loads back as the same key', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'amf-key-'));
    dirs.push(dir);
    const file = join(dir, 'agents', 'w', 'agent.nkey');
    const first = await loadOrCreateAgentKey(file);
    expect(isNkeyUser(first.publicKey)).toBe(true);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'agents', 'w'))).mode & 0o777).toBe(0o700);
    expect((await readFile(file, 'utf8')).trim()).toMatch(/^SU[A-Z2-7]{56}$/);
    const again = await loadOrCreateAgentKey(file);
    expect(again.publicKey).toBe(first.publicKey);
  });

  it('refuses a file that holds no seed', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'amf-key-'));
    dirs.push(dir);
    const file = join(dir, 'agent.nkey');
    await writeFile(file, 'not a seed', { mode: 0o600 });
    await expect(loadOrCreateAgentKey(file)).rejects.toThrow(/nkey user seed/);
  });
});

describe('event signatures', () => {
  const key = createEphemeralAgentKey();

  it('canonical JSON sorts keys at every level and drops undefined', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { f: 2, e: 3 }], c: undefined } })).toBe(
      '{"a":{"d":[1,{"e":3,"f":2}]},"b":1}',
    );
  });

  it('a signed event is a valid AMF event and verifies after a JSON round trip in any key order', () => {
    const event = signEvent(final(), key);
    expect(validateEvent(event).ok).toBe(true);
    const reordered = JSON.parse(
      JSON.stringify(Object.fromEntries(Object.entries(event).reverse())),
    ) as object;
    expect(checkEventSignature(reordered)).toEqual({ ok: true, signer: key.publicKey });
  });

  it('any change breaks it: payload, identity, signer; unsigned and malformed are told apart', () => {
    const tamper = (change: (e: ReturnType<typeof final>) => void) => {
      const e = JSON.parse(JSON.stringify(signEvent(final(), key))) as ReturnType<typeof final>;
      change(e);
      return checkEventSignature(e);
    };
    expect(tamper((e) => (e.data.payload.agent_id = 'spiffe://local/worker/b')).ok).toBe(false);
    expect(tamper((e) => (e.data.auth_context.identity = 'spiffe://local/worker/b')).ok).toBe(false);
    const other = createEphemeralAgentKey();
    expect(
      tamper((e) => ((e as unknown as Record<string, string>).amfsigner = other.publicKey)),
    ).toMatchObject({
      ok: false,
      reason: 'bad_signature',
    });
    expect(checkEventSignature(final())).toEqual({ ok: false, reason: 'unsigned' });
    expect(tamper((e) => ((e as unknown as Record<string, string>).amfsignature = 'x'))).toMatchObject({
      reason: 'malformed_signature',
    });
  });

  it('the worker signature travels with a relayed final and binds its payload', () => {
    const worker = JSON.parse(JSON.stringify(signEvent(final(), key))) as ReturnType<typeof final>;
    expect(checkEventSignature(worker)).toEqual({ ok: true, signer: key.publicKey });
    const relayed = carryResultSignature(worker, {
      ...final(),
      amfagentrole: 'coordinator' as const,
      source: 'http://coordinator',
    });
    expect(checkResultSignature(relayed)).toEqual({ ok: true, signer: key.publicKey });
    // Relayed again (an adopted orphan's final): the worker's signature is copied as it is.
    const again = carryResultSignature(relayed, { ...final(), amfagentrole: 'coordinator' as const });
    expect(checkResultSignature(again)).toEqual({ ok: true, signer: key.publicKey });
    relayed.data.payload.result = { text: 'changed' };
    expect(checkResultSignature(relayed).ok).toBe(false);
    const noEnvelope = { ...again } as Record<string, unknown>;
    delete noEnvelope.amfresultenv;
    expect(checkResultSignature(noEnvelope)).toMatchObject({ ok: false, reason: 'malformed_signature' });
    // A standalone result signature (a final published without an event signature) verifies alike.
    expect(checkResultSignature(signResult(final(), key))).toEqual({ ok: true, signer: key.publicKey });
  });

  it("a final's one signature still covers its whole envelope", () => {
    const tamper = (change: (e: Record<string, unknown>) => void) => {
      const e = JSON.parse(JSON.stringify(signEvent(final(), key))) as Record<string, unknown>;
      change(e);
      return checkEventSignature(e).ok;
    };
    expect(tamper(() => undefined)).toBe(true);
    expect(tamper((e) => (e.amfconfidence = '0.1'))).toBe(false);
    expect(tamper((e) => (e.source = 'http://elsewhere'))).toBe(false);
    expect(
      tamper((e) => ((e.data as { auth_context: { identity: string } }).auth_context.identity = 'x')),
    ).toBe(false);
  });

  const claim = (taskId: string) =>
    createEvent({
      type: 'amf.task.claim',
      sender,
      payload: { task_id: taskId, agent_id: sender.identity, required_capability: 'echo', attempt: 1 },
      taskId,
    });

  /** Fresh copies (as from the wire) of one claim signed with `key` as another process signs it. */
  const signedClaimCopies = (taskId: string) => {
    const signed = signElsewhere(claim(taskId), key);
    return () => JSON.parse(JSON.stringify(signed)) as typeof signed;
  };

  it('a second copy of a verified event is believed only with the same signed text', () => {
    const copy = signedClaimCopies('t-1');
    expect(checkEventSignature(copy())).toEqual({ ok: true, signer: key.publicKey });
    expect(checkEventSignature(copy())).toEqual({ ok: true, signer: key.publicKey });
    // Same signature, different text: not taken from the memory of the first check.
    const changed = copy();
    changed.data.payload.attempt = 2;
    expect(checkEventSignature(changed)).toMatchObject({ ok: false, reason: 'bad_signature' });
    const otherSigner = copy() as unknown as Record<string, string>;
    otherSigner.amfsigner = createEphemeralAgentKey().publicKey;
    expect(checkEventSignature(otherSigner)).toMatchObject({ ok: false, reason: 'bad_signature' });
  });

  it('the thread-pool check agrees with the inline one, and two copies in flight share one verification', async () => {
    const copy = signedClaimCopies('t-async');
    const first = checkEventSignatureAsync(copy());
    const second = checkEventSignatureAsync(copy());
    // Not remembered yet: both are promises, and the second is the first one's.
    expect(first).toBeInstanceOf(Promise);
    expect(second).toBe(first);
    expect(await first).toEqual({ ok: true, signer: key.publicKey });
    // Verified now: answered at once, without a promise.
    expect(checkEventSignatureAsync(copy())).toEqual({ ok: true, signer: key.publicKey });
    const forged = copy();
    forged.data.payload.attempt = 7;
    expect(await checkEventSignatureAsync(forged)).toMatchObject({ ok: false, reason: 'bad_signature' });
    const unsigned = copy() as unknown as Record<string, unknown>;
    delete unsigned.amfsigner;
    delete unsigned.amfsignature;
    expect(checkEventSignatureAsync(unsigned)).toEqual({ ok: false, reason: 'unsigned' });
    const relayed = carryResultSignature(signEvent(final(), key), final());
    expect(await checkResultSignatureAsync(relayed)).toEqual({ ok: true, signer: key.publicKey });
    relayed.data.payload.result = { text: 'not what the worker said' };
    expect(await checkResultSignatureAsync(relayed)).toMatchObject({ ok: false, reason: 'bad_signature' });
  });

  it('what this process signed itself is believed without Ed25519, once it checks signatures, for exactly that text', async () => {
    // A fresh copy of the module: nothing checked, nothing remembered yet.
    vi.resetModules();
    const fresh = await import('../../src/identity/eventSignature.js');
    const { ed25519 } = await import('../../src/identity/ed25519.js');
    const verify = vi.spyOn(ed25519, 'verify');
    const wire = <T>(event: T): T => JSON.parse(JSON.stringify(event)) as T;
    try {
      // A process that has not checked anything (a worker on its own) keeps nothing it signs.
      const before = fresh.signEvent(claim('own-0'), key);
      expect(fresh.checkEventSignature(wire(before))).toEqual({ ok: true, signer: key.publicKey });
      expect(verify).toHaveBeenCalledTimes(1);
      // Now it checks signatures (a coordinator runs here): its own claim, final and relay-ready
      // result signature are believed without a verification.
      const own = fresh.signEvent(claim('own-1'), key);
      expect(fresh.checkEventSignature(wire(own))).toEqual({ ok: true, signer: key.publicKey });
      const ownFinal = fresh.signEvent(final(), key);
      expect(fresh.checkEventSignature(wire(ownFinal))).toEqual({ ok: true, signer: key.publicKey });
      const ownResult = fresh.signResult(final(), key);
      expect(fresh.checkResultSignature(wire(ownResult))).toEqual({ ok: true, signer: key.publicKey });
      expect(verify).toHaveBeenCalledTimes(1);
      // Any other text under that signature, or another named signer, is verified, and fails.
      const changed = wire(own);
      changed.data.payload.attempt = 2;
      expect(fresh.checkEventSignature(changed)).toMatchObject({ ok: false, reason: 'bad_signature' });
      const otherSigner = wire(own) as unknown as Record<string, string>;
      otherSigner.amfsigner = createEphemeralAgentKey().publicKey;
      expect(fresh.checkEventSignature(otherSigner)).toMatchObject({ ok: false, reason: 'bad_signature' });
      const changedResult = wire(ownResult);
      changedResult.data.payload.result = { text: 'not what the worker said' };
      expect(fresh.checkResultSignature(changedResult)).toMatchObject({ ok: false, reason: 'bad_signature' });
      expect(verify).toHaveBeenCalledTimes(4);
    } finally {
      verify.mockRestore();
    }
  });

  it('canonical JSON agrees with a plain recursive sort on random objects, large ones and unseen keys included', () => {
    const reference = (value: unknown): string => {
      if (Array.isArray(value)) return `[${value.map((v) => reference(v ?? null)).join(',')}]`;
      if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
      const members = Object.keys(value)
        .sort()
        .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
        .map((k) => `${JSON.stringify(k)}:${reference((value as Record<string, unknown>)[k])}`);
      return `{${members.join(',')}}`;
    };
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const keyOf = () =>
      [...Array(1 + Math.floor(random() * 6))]
        .map(() => String.fromCharCode(0x20 + Math.floor(random() * 0x2f0)))
        .join('');
    const make = (depth: number): unknown => {
      const pick = random();
      if (depth > 2 || pick < 0.3)
        return [1, -0, 2.5, 'x"\\', true, null, undefined][Math.floor(random() * 7)];
      if (pick < 0.45) return [...Array(Math.floor(random() * 4))].map(() => make(depth + 1));
      const object: Record<string, unknown> = {};
      // Up to 60 keys: both the in-place sort (≤ 32) and Array.prototype.sort (more) are taken.
      for (let i = Math.floor(random() * 60); i > 0; i--) object[keyOf()] = make(depth + 1);
      return object;
    };
    // More distinct keys than the quoted-name memory keeps (512): past it, names are quoted afresh.
    for (let i = 0; i < 120; i++) {
      const value = make(0);
      expect(canonicalJson(value)).toBe(reference(value));
    }
  });

  it('canonical JSON keeps already sorted keys and sorts the rest the same way', () => {
    const sorted = { a: 1, b: [true, null, 'x'], c: { d: 1.5, e: -2 } };
    const shuffled = { c: { e: -2, d: 1.5 }, b: [true, undefined, 'x'], a: 1 };
    expect(canonicalJson(sorted)).toBe('{"a":1,"b":[true,null,"x"],"c":{"d":1.5,"e":-2}}');
    expect(canonicalJson(shuffled)).toBe(canonicalJson(sorted));
    expect(canonicalJson({ é: 1, Z: 2, a: '\u2028"' })).toBe('{"Z":2,"a":"\u2028\\"","é":1}');
  });
});
