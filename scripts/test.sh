#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine, then builds, lints and runs every test.
# The tests run inside a private network namespace (unshare -n, loopback only) so nothing they do,
# multicast included, can reach this machine's real network.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_debian_package 'command -v nats-server' nats-server
# The pinned newer nats-server that the 3-node cluster tests (test/cluster) run on.
AMF_NATS_CLUSTER_BIN="$(bash scripts/install-nats.sh)"; export AMF_NATS_CLUSTER_BIN

# Pinned spire-server and spire-agent for the SPIFFE identity tests (test/identity run real SPIRE).
# Cached by version; a cold build is ~13 CPU-minutes, paid once per machine.
AMF_SPIRE_DIR="$(bash scripts/install-spire.sh)"; export AMF_SPIRE_DIR

# Debian's python3-zeroconf is the independent mDNS implementation our records are checked against.
ensure_debian_package "/usr/bin/python3 -c 'import zeroconf'" python3-zeroconf

# The openssl CLI makes the self-signed certificates of the MCP TOFU pinning tests.
ensure_debian_package 'command -v openssl' openssl

# Debian's Chromium: test/web/console.test.ts drives the console in it (through playwright-core).
ensure_debian_package 'test -x /usr/bin/chromium' chromium

# The Python OpenAI and A2A clients are interop peers of our APIs; they live in the project's own venv
# (.cache/python-venv), never in the system's Python.
AMF_TEST_PYTHON="$(ensure_python_venv)"; export AMF_TEST_PYTHON
# A client of the A2A 0.3 line (a2a-sdk 0.3.x) in a venv of its own: 0.3 clients stay first-class.
AMF_TEST_PYTHON_A2A03="$(ensure_python_a2a03_venv)"; export AMF_TEST_PYTHON_A2A03
# The A2A TCK's own venv (from PyPI, so before the namespace); its phase is skipped without the TCK.
node scripts/conformance.mjs --prepare --suite a2a || echo "!! the A2A TCK's venv is not ready: its test phase will skip" >&2

# Real OPA for the policy tests (opa eval, opa run --server, --policy DIR) and npm run build:policy.
export PATH="$PATH:${GOPATH:-$HOME/go}/bin"
if ! command -v opa >/dev/null 2>&1; then
  echo "==> installing opa v1.10.1 (go install; takes a few minutes on a cold cache)"
  go install github.com/open-policy-agent/opa@v1.10.1
fi
export AMF_OPA_BIN="$(command -v opa)"
opa version | sed -n 1p # sed reads everything: head would make opa die of SIGPIPE under pipefail
opa test policies/
(cd policies && sha256sum -c --quiet ../policy-bundle/bundle.sources.sha256)

ensure_npm_packages

echo "==> build, typecheck, lint, format"
npm run --silent build
# `npm start` after `npm test` finds the build current (scripts/up.sh).
touch dist/.amf-build-stamp
npx tsc -p tsconfig.test.json --noEmit
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
