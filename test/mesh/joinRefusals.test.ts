// POST /join needs no key (the invite is the credential), so a stranger may send many bad joins: each
// is refused with what was wrong, and the operator hears of them once per source and window, not once
// per request (a flood of refusals must not become a flood of events).
import { nkeys } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestMesh, type TestMesh } from '../helpers/meshFixture.js';

describe('POST /join refusals', () => {
  let mesh: TestMesh;
  beforeAll(async () => {
    mesh = await startTestMesh();
  });
  afterAll(() => mesh?.close());

  it('refuses a forged invite with a reason, and warns once per source', async () => {
    // A token of the right shape, signed by another key than this coordinator's.
    const forged = 'eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.eyJhdWQiOiJhbWY6am9pbiJ9.' + 'A'.repeat(86);
    const body = JSON.stringify({
      invite: forged,
      nkey: nkeys.createUser().getPublicKey(),
      name: 'stranger',
      tags: ['echo'],
      proof: 'A'.repeat(86),
    });
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${mesh.url}/join`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      expect(res.status).toBe(401);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain(
        'not issued by this coordinator',
      );
    }
    await mesh.waitForEvent((e) => (e.event.data.payload as { reason?: string }).reason === 'join_refused');
    await new Promise((r) => setTimeout(r, 300));
    const warnings = mesh.events.filter(
      (e) => (e.event.data.payload as { reason?: string }).reason === 'join_refused',
    );
    expect(warnings).toHaveLength(1);
  });

  it('refuses a body that is not a join request, saying which field is wrong', async () => {
    const res = await fetch(`${mesh.url}/join`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ invite: 'x', nkey: 'not-a-key' }),
    });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { message: string } };
    expect(error.message).toContain('"nkey" must be');
  });
});
