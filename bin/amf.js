#!/usr/bin/env node
// Entry point of the `amf` command: the compiled CLI lives in dist/ (run `npm run build`).
// `amf --version` alone is answered without loading the CLI (start-up time, issue 14).
const args = process.argv.slice(2);
const versionOnly = args.length === 1 && (args[0] === '--version' || args[0] === '-V');
(versionOnly
  ? import('../dist/version.js').then((m) => process.stdout.write(`${m.VERSION}\n`))
  : import('../dist/cli/main.js').then((m) => m.main(process.argv))
).catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
