/**
 * Watcher threads run the compiled entry in dist/ (Node 20 worker threads cannot load TypeScript),
 * so the thread tests would silently exercise old code after a source change without a rebuild.
 * This check turns that into a clear failure.
 */
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const MODULES = [
  'riskRules',
  'advertisementText',
  'llmScorer',
  'threadProtocol',
  'watcherThread',
  'contextEntry',
  'contextJudge',
  'rulesScript',
];

/** Throws unless every thread module in dist/ exists and is newer than its source. */
export function assertThreadBuildFresh(): void {
  for (const name of MODULES) {
    const src = fileURLToPath(new URL(`../../src/watcher/${name}.ts`, import.meta.url));
    const dist = fileURLToPath(new URL(`../../dist/watcher/${name}.js`, import.meta.url));
    if (!existsSync(dist) || statSync(dist).mtimeMs < statSync(src).mtimeMs) {
      throw new Error(
        `${dist} is missing or older than ${src}: run \`npx tsc -p tsconfig.json\` before these tests`,
      );
    }
  }
}
