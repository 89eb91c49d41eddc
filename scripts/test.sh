#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine (scripts/provision.sh), then builds, lints and
# runs every test.
# The tests run inside a private network namespace (unshare -n, loopback only) so nothing they do,
# multicast included, can reach this machine's real network.
set -euo pipefail
cd "$(dirname "$0")/.."

# Everything the tests need (apt packages, pinned nats-server, SPIRE and OPA, the Python venvs, the
# npm packages), then the environment that names them.
bash scripts/provision.sh
# shellcheck source=/dev/null
. .cache/test-env.sh

echo "==> policy tests and bundle drift"
opa test policies/
(cd policies && sha256sum -c --quiet ../policy-bundle/bundle.sources.sha256)

echo "==> build, typecheck, lint, format"
npm run --silent build
# `npm start` after `npm test` finds the build current (scripts/up.sh).
touch dist/.amf-build-stamp
npx tsc -p tsconfig.test.json --noEmit
# The plain-JS parts, checked from their JSDoc: the benchmarks (Node) and the console's scripts (browser).
npx tsc -p tsconfig.bench.json
npx tsc -p tsconfig.console.json
# Tracked files only: a scratch file of the user's in the checkout is not the project's to lint.
git ls-files -z -- '*.ts' '*.js' '*.mjs' '*.cjs' | xargs -0 npx eslint --max-warnings=0 --no-warn-ignored
git ls-files -z | xargs -0 npx prettier --check --ignore-unknown --log-level warn

echo "==> tests (inside a private network namespace)"
# Four phases (docs/development.md): the suite two files at a time; then the quick fault drill on its
# own, because it drives hundreds of tasks through a dozen real processes and starves whatever runs
# beside it; then the 3-node cluster tests, which time replicated JetStream leader elections against
# task TTLs; then the A2A TCK against a mesh (about five minutes, test/conformance).
results=.cache/test-results
rm -rf "$results" && mkdir -p "$results"
phase() { # name, vitest arguments...: runs one phase, keeps its counts, never stops the others
  local name="$1"
  shift
  echo "==> test phase: $name"
  npx vitest run "$@" --reporter=default --reporter=json --outputFile.json="$results/$name.json" || echo "$name" >>"$results/failed"
}
export -f phase
export results
vitest_all='phase suite --exclude "test/cluster/**" --exclude "test/faults/**" --exclude "test/conformance/**"; phase faults test/faults; phase cluster test/cluster; phase conformance test/conformance'
run_tests="ip link set lo up && ip link set lo multicast on && ip route add 224.0.0.0/4 dev lo 2>/dev/null; $vitest_all"
if unshare -n true 2>/dev/null; then
  unshare -n bash -c "$run_tests"
elif [ "$(id -u)" -ne 0 ] && sudo -n true 2>/dev/null; then
  sudo -E unshare -n bash -c "$run_tests"
else
  echo "!! cannot create a network namespace (need root or sudo): running tests on the host loopback" >&2
  bash -c "$vitest_all"
fi

# One line for all phases (each phase also printed its own summary above).
node scripts/lib/testSummary.mjs "$results" suite,faults,cluster,conformance
