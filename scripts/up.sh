#!/usr/bin/env bash
# Installs what is missing (npm packages, nats-server), builds, and starts the mesh with the demo
# workers and the UI. Extra arguments go to `amf up` (e.g. --port 0, --no-mdns).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_debian_package 'command -v nats-server' nats-server
if [ ! -d node_modules ]; then npm ci --no-audit --no-fund --loglevel=error; fi
npm run --silent build
exec node bin/amf.js up --demo "$@"
