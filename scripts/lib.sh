# Shared by scripts/up.sh, scripts/bench.sh and scripts/provision.sh (sourced, not run).
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
# chosen one: Debian's 2.9 slows a long-running mesh down as its streams fill (docs/performance.md;
# `amf up` warns about it), the pinned release stays flat.
use_pinned_nats_server_if_installed() {
  local pinned
  if [ -z "${AMF_NATS_SERVER_BIN:-}" ] && pinned="$(bash scripts/install-nats.sh --if-installed)"; then
    export AMF_NATS_SERVER_BIN="$pinned"
    echo "==> nats-server: $pinned (scripts/install-nats.sh)"
  fi
}

# Node flags of the mesh process that `npm start` runs (and `npm run bench` measures). V8's young
# generation grows to 2 × 16 MB under load and stays committed after every GC; capped at 2 × 8 MB the
# coordinator's RSS is lower after load, for a little more of the main thread in GC
# (docs/performance.md). Set AMF_NODE_FLAGS (empty for none) to choose others.
AMF_NODE_FLAGS="${AMF_NODE_FLAGS---max-semi-space-size=8}"

# Installs the npm packages unless the stamp says this lock file (and this Node ABI) is installed:
# npm ci is complete only when it wrote the stamp at its end, so an interrupted install, or a changed
# package-lock.json, installs again. Shared by `npm start` and `npm test`, so one does not make the
# other reinstall.
ensure_npm_packages() {
  local install_stamp=node_modules/.amf-install-stamp
  local lock_hash
  lock_hash="$(sha256sum package-lock.json | cut -d' ' -f1) node $(node -p 'process.versions.modules')"
  if [ ! -f "$install_stamp" ] || [ "$(cat "$install_stamp")" != "$lock_hash" ] || [ ! -x node_modules/.bin/tsc ]; then
    echo "==> installing npm packages (npm ci; the first run takes a minute or two)"
    with_progress 'npm ci' npm ci --no-audit --no-fund --loglevel=error
    echo "$lock_hash" >"$install_stamp"
  fi
}

# The project's own Python (a venv in .cache/python-venv), with the pinned interop clients the tests
# drive: never pip into the system's Python. Prints the interpreter's path.
ensure_python_venv() {
  local venv=.cache/python-venv
  if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating the project's Python venv ($venv)" >&2
    python3 -m venv "$venv" >&2 || {
      ensure_debian_package 'false' python3-venv >&2 && python3 -m venv "$venv" >&2
    }
  fi
  local want="openai==3.54.0 a2a-sdk==1.3.0"
  if [ "$(cat "$venv/.amf-packages" 2>/dev/null)" != "$want" ]; then
    echo "==> installing the Python interop clients into $venv: $want" >&2
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $want >&2
    echo "$want" >"$venv/.amf-packages"
  fi
  echo "$PWD/$venv/bin/python"
}

# A second venv (.cache/python-venv-a2a03) with a client of the A2A 0.3 line: the 0.3 and 1.x
# lines of a2a-sdk are one package name, so they cannot share a venv. test/a2a/a2a03Client.test.ts
# drives it against the coordinator. Prints the interpreter's path.
ensure_python_a2a03_venv() {
  local venv=.cache/python-venv-a2a03
  if [ ! -x "$venv/bin/python" ]; then
    echo "==> creating the A2A 0.3 client venv ($venv)" >&2
    python3 -m venv "$venv" >&2 || {
      ensure_debian_package 'false' python3-venv >&2 && python3 -m venv "$venv" >&2
    }
  fi
  local want="a2a-sdk==0.3.26"
  if [ "$(cat "$venv/.amf-packages" 2>/dev/null)" != "$want" ]; then
    echo "==> installing the A2A 0.3 client into $venv: $want" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$want" >&2
    echo "$want" >"$venv/.amf-packages"
  fi
  echo "$PWD/$venv/bin/python"
}
