# Shared by scripts/up.sh and scripts/test.sh (sourced, not run).
# shellcheck shell=bash

# Runs a command as root: directly when we are root, else through sudo; without either it says what
# to run instead of dying with `sudo: command not found`.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "!! this step needs root and sudo is not installed: run as root, or run yourself: $*" >&2
    return 1
  fi
}

# Installs Debian package $2 unless command $1 already works.
ensure_debian_package() {
  local probe="$1" package="$2"
  if bash -c "$probe" >/dev/null 2>&1; then return 0; fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "!! $package is missing and this is not a Debian/Ubuntu system (no apt-get): install $package with your package manager, then run this again" >&2
    return 1
  fi
  echo "==> installing $package (Debian package)"
  as_root apt-get update -qq || {
    echo "!! could not install $package: install it yourself (apt-get install $package) and run this again" >&2
    return 1
  }
  as_root apt-get install -y -qq "$package"
}

# Runs "$@" and prints a line every 15 s while it works, so a long step is not mistaken for a hang.
with_progress() {
  local what="$1"
  shift
  local started=$SECONDS
  (while sleep 15; do echo "    ... $what: $((SECONDS - started)) s so far"; done) &
  local ticker=$!
  local status=0
  "$@" || status=$?
  kill "$ticker" 2>/dev/null
  wait "$ticker" 2>/dev/null || true
  return "$status"
}

# Spawns the pinned nats-server of scripts/install-nats.sh when it is installed and the caller has not
# chosen one: Debian's 2.9 slows a long-running mesh down as its streams fill (docs/benchmarks.md,
# "…late"; `amf up` warns about it), the pinned release stays flat.
use_pinned_nats_server_if_installed() {
  local pinned
  if [ -z "${AMF_NATS_SERVER_BIN:-}" ] && pinned="$(bash scripts/install-nats.sh --if-installed)"; then
    export AMF_NATS_SERVER_BIN="$pinned"
    echo "==> nats-server: $pinned (scripts/install-nats.sh)"
  fi
}

# Node flags of the mesh process that `npm start` runs (and `npm run bench` measures). V8's young
# generation grows to 2 × 16 MB under load and stays committed after every GC; capped at 2 × 8 MB the
# coordinator's RSS is 20–50 MB lower after load, for about 2.5 % of the main thread in GC at
# concurrency 64 (docs/benchmarks.md, "…after midnight"). Set AMF_NODE_FLAGS (empty for none) to
# choose others.
AMF_NODE_FLAGS="${AMF_NODE_FLAGS---max-semi-space-size=8}"
