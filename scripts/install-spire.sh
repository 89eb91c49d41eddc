#!/usr/bin/env bash
# Installs the pinned spire-server and spire-agent that the SPIFFE tests (test/identity) run against,
# into a per-version cache dir, only if they are not there yet, and prints that dir on stdout.
# SPIRE's go.mod carries replace directives, so `go install ...@version` refuses it; building from
# a throwaway module that depends on SPIRE (go get -tool) resolves the same pinned versions instead.
# A cold build takes ~13 CPU-minutes (about 7 minutes wall on 2 cores); later runs find the cache.
set -euo pipefail

SPIRE_VERSION="${AMF_SPIRE_VERSION:-v1.13.3}"
cache_root="${AMF_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/amf}"
install_dir="$cache_root/spire-$SPIRE_VERSION"

if [ ! -x "$install_dir/spire-server" ] || [ ! -x "$install_dir/spire-agent" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "install-spire.sh: the Go toolchain is needed to build SPIRE $SPIRE_VERSION" >&2
    echo "  (install Go from https://go.dev/dl/, or put spire-server and spire-agent into $install_dir)" >&2
    exit 1
  fi
  echo "==> installing SPIRE $SPIRE_VERSION into $install_dir (go build; ~7 minutes on a cold cache)" >&2
  mkdir -p "$install_dir"
  # Built into a temp dir and renamed, so an interrupted build never leaves a binary the check
  # above would accept next time.
  work="$(mktemp -d "$install_dir/.build.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  (
    cd "$work"
    export GOFLAGS=-mod=mod GONOSUMDB='*' GOSUMDB=off GOBIN="$work/bin"
    go mod init amf.local/spire-build >/dev/null 2>&1
    go get -tool "github.com/spiffe/spire/cmd/spire-server@$SPIRE_VERSION" >&2
    go get -tool "github.com/spiffe/spire/cmd/spire-agent@$SPIRE_VERSION" >&2
    go install github.com/spiffe/spire/cmd/spire-server github.com/spiffe/spire/cmd/spire-agent >&2
  )
  mv "$work/bin/spire-server" "$install_dir/spire-server"
  mv "$work/bin/spire-agent" "$install_dir/spire-agent"
fi

# Catches a cache dir filled by hand with some other build.
version="$("$install_dir/spire-server" --version 2>&1 || true)"
if [ "$version" != "${SPIRE_VERSION#v}" ] && ! printf '%s' "$version" | grep -q "^${SPIRE_VERSION#v}"; then
  echo "install-spire.sh: $install_dir/spire-server reports version '$version', not $SPIRE_VERSION" >&2
  exit 1
fi
echo "$install_dir"
