#!/usr/bin/env bash
# Installs what is missing (npm packages, nats-server), builds what changed, and starts the mesh with
# the demo workers and the console. Extra arguments go to `amf up` (e.g. --port 0, --no-mdns).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_debian_package 'command -v nats-server' nats-server
use_pinned_nats_server_if_installed

ensure_npm_packages
install_stamp=node_modules/.amf-install-stamp

# Rebuild only when a source, the compiler settings or the packages changed since the last build.
build_stamp=dist/.amf-build-stamp
# src/web is served as it is (no build step), so it does not count.
changed() { find src tsconfig.json "$install_stamp" -path src/web -prune -o -newer "$build_stamp" -print -quit; }
if [ ! -f "$build_stamp" ] || [ -n "$(changed)" ]; then
  echo "==> building (tsc)"
  with_progress 'tsc' npm run --silent build
  touch "$build_stamp"
fi

echo "==> starting the mesh: console at http://127.0.0.1:8765/ (unless --port says otherwise)"
# Split into words, never glob-expanded.
read -r -a node_flags <<<"$AMF_NODE_FLAGS"
exec node "${node_flags[@]}" bin/amf.js up --demo "$@"
