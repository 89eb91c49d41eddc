#!/usr/bin/env node
// Entry point of the `amf` command: the compiled CLI lives in dist/ (run `npm run build`).
import('../dist/cli/main.js')
  .then((m) => m.main(process.argv))
  .catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
