#!/usr/bin/env bash
# Installs the pinned nats-server that the cluster tooling (scripts/cluster.sh, test/cluster) needs,
# into a per-version cache dir, only if it is not there yet, and prints its path on stdout.
# `npm start` and `npm run bench` spawn it instead of Debian's once it is installed (scripts/lib.sh).
# Debian's nats-server (2.9.x) runs the single-node mesh fine, but clustered JetStream (replicated
# streams and KV, scaling replicas by update, leader elections after a node loss) matured in 2.10+;
# pinning one version keeps every developer's cluster and the tests on the same behaviour.
# Building from source with `go install` needs only the Go toolchain and the Go module proxy.
set -euo pipefail

NATS_SERVER_VERSION="${AMF_NATS_SERVER_VERSION:-v2.12.15}"
cache_root="${AMF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/amf}"
install_dir="$cache_root/nats-server-$NATS_SERVER_VERSION"
binary="$install_dir/nats-server"

# --if-installed: only print the path of an installed copy (exit 1 when there is none); never build.
if [ "${1:-}" = "--if-installed" ]; then
  [ -x "$binary" ] && "$binary" --version 2>/dev/null | grep -q "${NATS_SERVER_VERSION#v}" || exit 1
  echo "$binary"
  exit 0
fi

if [ ! -x "$binary" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "install-nats.sh: the Go toolchain is needed to build nats-server $NATS_SERVER_VERSION" >&2
    echo "  (install Go from https://go.dev/dl/, or point AMF_NATS_SERVER_BIN at a nats-server >= 2.10)" >&2
    exit 1
  fi
  echo "==> installing nats-server $NATS_SERVER_VERSION into $install_dir (go install; a few minutes on a cold cache)" >&2
  mkdir -p "$install_dir"
  # GOBIN points go install at our cache dir; a temp name plus rename means an interrupted build
  # never leaves a half-written binary that the -x check above would accept next time.
  tmp_bin="$(mktemp -d "$install_dir/.build.XXXXXX")"
  trap 'rm -rf "$tmp_bin"' EXIT
  GOBIN="$tmp_bin" GOFLAGS="${GOFLAGS:--mod=mod}" go install "github.com/nats-io/nats-server/v2@$NATS_SERVER_VERSION"
  mv "$tmp_bin/nats-server" "$binary"
fi

# The version check catches a cache dir filled by hand with some other build.
if ! "$binary" --version | grep -q "${NATS_SERVER_VERSION#v}"; then
  echo "install-nats.sh: $binary is not nats-server $NATS_SERVER_VERSION ($("$binary" --version))" >&2
  exit 1
fi
echo "$binary"
