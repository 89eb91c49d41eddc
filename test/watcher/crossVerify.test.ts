// Contract between the watcher and the coordinator's cross-verification (#9): a faithful watcher's
// summary never disagrees with the coordinator's own parse of the same TXT.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crossVerify } from '../../src/admission/crossVerify.js';
import { validateAdvertisement } from '../../src/admission/validateAdvertisement.js';
import { DmzWatcher } from '../../src/watcher/watcherPool.js';
import { makeAd } from './ads.js';
import { assertThreadBuildFresh } from './threadBuild.js';

let watcher: DmzWatcher;
beforeAll(() => {
  assertThreadBuildFresh();
  watcher = new DmzWatcher();
});
afterAll(async () => {
  await watcher.close();
});

describe('watcher summary vs coordinator parse', () => {
  const cases: Record<string, Record<string, string | undefined>> = {
    'all keys': {},
    'no td, card or mcp': { td: undefined, card: undefined, mcp: undefined, proto: 'A2A/1.0' },
    'spaces in the protocol list': { proto: ' A2A/1.0 , MCP/2024-11-05 ,' },
    'another trust domain': { td: 'example.org' },
  };
  for (const [name, overrides] of Object.entries(cases)) {
    it(`${name}: no mismatch`, async () => {
      const ad = makeAd(overrides);
      const check = validateAdvertisement(ad);
      expect(check.ok).toBe(true);
      if (!check.ok) return;
      expect(crossVerify(check.record, await watcher.judge(ad))).toEqual([]);
    });
  }
});
