#!/usr/bin/env bash
# Installs what is missing (npm packages, nats-server), builds, and starts the mesh with the demo
# workers and the UI. Extra arguments go to `amf up` (e.g. --port 0, --no-mdns).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v nats-server >/dev/null 2>&1; then
  echo "==> installing nats-server (Debian package)"
  as_root apt-get update -qq
  as_root apt-get install -y -qq nats-server
fi
if [ ! -d node_modules ]; then npm ci --no-audit --no-fund --loglevel=error; fi
npm run --silent build
exec node bin/amf.js up --demo "$@"
