/**
 * Keeps `npm run test:unit` honest (test/unitTests.ts): every file it lists exists, and none imports
 * what starts a process, a nats-server, a coordinator or mDNS multicast, or skips itself when a
 * provisioned tool is missing. Read from the import statements, like the layer test.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UNIT_TEST_FILES } from '../unitTests.js';

const ROOT = resolve(import.meta.dirname, '../..');

/** Import specifiers (matched against the path's end) that bring a server, a process or multicast. */
const NEEDS_MORE_THAN_NODE = [
  /^node:child_process$/,
  /^multicast-dns$/,
  /\/(natsFixture|meshFixture|natsCluster|lanAmf|lifecycleFixture|amfCli|calloutNats|httpFromProcess)\.js$/,
  /\/(signingBus|takeOffer|streamRefusal|mdnsTestKit)\.js$/,
  /\/fabric\/natsServer\.js$/,
  /\/coordinator\/coordinator\.js$/,
  /\/apps\/(coordinatorApp|coordinatorRuntime|workerApp|a2aBridgeApp)\.js$/,
  /\/discovery\/mdns[A-Za-z]*\.js$/,
];

function importsOf(source: string): string[] {
  return [...source.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)].map((match) => match[1] ?? '');
}

describe('the unit test list', () => {
  it('lists existing test files, once each', () => {
    expect(UNIT_TEST_FILES.length).toBeGreaterThan(0);
    expect(new Set(UNIT_TEST_FILES).size).toBe(UNIT_TEST_FILES.length);
    const missing = UNIT_TEST_FILES.filter(
      (file) => !file.endsWith('.test.ts') || !existsSync(resolve(ROOT, file)),
    );
    expect(missing).toEqual([]);
  });

  it('holds no test that needs a server, a process or multicast', () => {
    const offenders: string[] = [];
    for (const file of UNIT_TEST_FILES) {
      const source = readFileSync(resolve(ROOT, file), 'utf8');
      for (const specifier of importsOf(source)) {
        if (NEEDS_MORE_THAN_NODE.some((pattern) => pattern.test(specifier)))
          offenders.push(`${file} imports ${specifier}`);
      }
      if (/\.skipIf\(|\.skip\(|\.runIf\(/.test(source)) offenders.push(`${file} skips itself on a condition`);
    }
    expect(offenders).toEqual([]);
  });

  it('would catch a test that starts a nats-server', () => {
    const helper = 'natsFixture'; // spelled apart so that this file does not import it in the check above
    const specifiers = importsOf(`import { startNats } from '../helpers/${helper}.js';`);
    expect(
      specifiers.some((specifier) => NEEDS_MORE_THAN_NODE.some((pattern) => pattern.test(specifier))),
    ).toBe(true);
  });
});
