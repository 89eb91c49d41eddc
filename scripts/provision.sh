#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine (every step skips itself when already done)
# and writes the environment the tests read to .cache/test-env.sh. scripts/test.sh runs this first,
# then sources that file. By hand, before single test files:
#   bash scripts/provision.sh && . .cache/test-env.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_debian_package 'command -v nats-server' nats-server
# The pinned newer nats-server that the 3-node cluster tests (test/cluster) run on.
AMF_NATS_CLUSTER_BIN="$(bash scripts/install-nats.sh)"

# Pinned spire-server and spire-agent for the SPIFFE identity tests (test/identity run real SPIRE).
# Cached by version; a cold build is ~13 CPU-minutes, paid once per machine.
AMF_SPIRE_DIR="$(bash scripts/install-spire.sh)"

# Debian's python3-zeroconf is the independent mDNS implementation our records are checked against.
ensure_debian_package "/usr/bin/python3 -c 'import zeroconf'" python3-zeroconf

# The openssl CLI makes the self-signed certificates of the MCP TOFU pinning tests.
ensure_debian_package 'command -v openssl' openssl

# Debian's Chromium: test/web/console.test.ts drives the console in it (through playwright-core).
ensure_debian_package 'test -x /usr/bin/chromium' chromium

# The Python OpenAI and A2A clients are interop peers of our APIs; they live in the project's own venv
# (.cache/python-venv), never in the system's Python.
AMF_TEST_PYTHON="$(ensure_python_venv)"
# A client of the A2A 0.3 line (a2a-sdk 0.3.x) in a venv of its own: 0.3 clients stay first-class.
AMF_TEST_PYTHON_A2A03="$(ensure_python_a2a03_venv)"
# The A2A TCK's own venv (from PyPI, so before the tests' namespace); its phase is skipped without it.
node scripts/conformance.mjs --prepare --suite a2a || echo "!! the A2A TCK's venv is not ready: its test phase will skip" >&2

# Real OPA for the policy tests (opa eval, opa run --server, --policy DIR) and npm run build:policy.
go_bin="${GOPATH:-$HOME/go}/bin"
export PATH="$PATH:$go_bin"
if ! command -v opa >/dev/null 2>&1; then
  echo "==> installing opa v1.10.1 (go install; takes a few minutes on a cold cache)"
  go install github.com/open-policy-agent/opa@v1.10.1
fi
AMF_OPA_BIN="$(command -v opa)"
opa version | sed -n 1p # sed reads everything: head would make opa die of SIGPIPE under pipefail

ensure_npm_packages

# What the tests read, written whole and then moved into place, so that a run stopped halfway leaves
# the previous file (or none), never half of one.
mkdir -p .cache
{
  echo "# Written by scripts/provision.sh: the tools the tests run. Source it; do not edit it."
  printf 'export PATH="$PATH":%q\n' "$go_bin"
  for name in AMF_NATS_CLUSTER_BIN AMF_SPIRE_DIR AMF_TEST_PYTHON AMF_TEST_PYTHON_A2A03 AMF_OPA_BIN; do
    printf 'export %s=%q\n' "$name" "${!name}"
  done
} >.cache/test-env.sh.tmp
mv .cache/test-env.sh.tmp .cache/test-env.sh
echo "==> provisioned: the tests' environment is in .cache/test-env.sh"
