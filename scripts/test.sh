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

# The Python OpenAI client is one of the interop peers of the OpenAI-compatible API.
if ! python3 -c 'import openai' >/dev/null 2>&1; then
  echo "==> installing the Python openai client"
  python3 -m pip install --quiet --disable-pip-version-check 'openai==3.54.0'
fi

# The official Python A2A client (no extras: the client needs only httpx) is an interop peer of our
# A2A servers, in protocol 1.0 and 0.3.
if ! python3 -c 'import a2a.client' >/dev/null 2>&1; then
  echo "==> installing the Python a2a-sdk client"
  python3 -m pip install --quiet --disable-pip-version-check 'a2a-sdk==1.3.0'
fi

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

echo "==> npm ci"
npm ci --no-audit --no-fund --loglevel=error

echo "==> build, typecheck, lint, format"
npm run --silent build
npx tsc -p tsconfig.test.json --noEmit
npx eslint . --max-warnings=0
npx prettier --check . --log-level warn

echo "==> tests (inside a private network namespace)"
# The 3-node cluster tests run after the rest, on their own: they time replicated JetStream leader
# elections against task TTLs, and the rest of the suite on 2 cores starves them (docs/development.md).
vitest_all='npx vitest run --exclude "test/cluster/**" && npx vitest run test/cluster'
run_tests="ip link set lo up && ip link set lo multicast on && ip route add 224.0.0.0/4 dev lo 2>/dev/null; $vitest_all"
if unshare -n true 2>/dev/null; then
  unshare -n bash -c "$run_tests"
elif [ "$(id -u)" -ne 0 ] && sudo -n true 2>/dev/null; then
  sudo -E unshare -n bash -c "$run_tests"
else
  echo "!! cannot create a network namespace (need root or sudo): running tests on the host loopback" >&2
  bash -c "$vitest_all"
fi
