// `amf worker` without --coordinator: finding the coordinator's URL by its role=coordinator TXT.
// Runs only inside a private network namespace (mdnsTestKit.onlyLoopback).
import { afterEach, describe, expect, it } from 'vitest';
import { AmfError } from '../../src/errors.js';
import { findCoordinatorByMdns } from '../../src/discovery/findCoordinator.js';
import { startMdnsAdvertiser, type MdnsAdvertiser } from '../../src/discovery/mdns/advertiser.js';
import { coordinatorTxt } from '../../src/discovery/txtRecord.js';
import { onlyLoopback, uniqueName } from './mdnsTestKit.js';

const advertisers: MdnsAdvertiser[] = [];
afterEach(async () => {
  await Promise.all(advertisers.splice(0).map((a) => a.close()));
});

describe.skipIf(!onlyLoopback())('findCoordinatorByMdns (private namespace)', () => {
  it('finds an advertised coordinator and returns its ep without a trailing slash', async () => {
    // Other test files in this namespace may advertise coordinators too, so the URL is unique to this run.
    const port = 20_000 + (process.pid % 20_000);
    const ep = `http://127.0.0.1:${port}/`;
    // An ordinary agent next to it must not be taken for the coordinator.
    advertisers.push(
      await startMdnsAdvertiser({
        instanceName: uniqueName('worker'),
        port: 8766,
        txt: { id: 'w', ep: 'http://127.0.0.1:1' },
      }),
    );
    const record = {
      agent_id: 'spiffe://local/coordinator/1',
      endpoint: ep,
      protocols_supported: ['A2A/1.0'],
    };
    advertisers.push(
      await startMdnsAdvertiser({
        instanceName: uniqueName('coordinator'),
        port,
        txt: coordinatorTxt(record),
      }),
    );
    const found = await findCoordinatorByMdns({ timeoutMs: 10_000 });
    // With parallel files a different coordinator may answer first; all are ours and well formed.
    expect(found).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(found).not.toBe('http://127.0.0.1:1');
  });

  it('times out with a TIMEOUT error that says what to do', async () => {
    // No coordinator is advertised by this test; another file's might be, so only check the shape of a miss.
    const result = await findCoordinatorByMdns({ timeoutMs: 300 }).catch((err: unknown) => err);
    if (typeof result === 'string') return;
    expect(result).toBeInstanceOf(AmfError);
    expect((result as AmfError).code).toBe('TIMEOUT');
    expect((result as AmfError).message).toMatch(/--coordinator/);
  });

  it('stops when its signal aborts', async () => {
    const controller = new AbortController();
    const search = findCoordinatorByMdns({ timeoutMs: 10_000, signal: controller.signal });
    controller.abort(new Error('stopped by the caller'));
    await expect(search).rejects.toThrow(/stopped by the caller/);
  });
});
