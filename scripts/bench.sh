#!/usr/bin/env bash
# `npm run bench`: every benchmark, against the nats-server that `npm start` would spawn.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib.sh
use_pinned_nats_server_if_installed
# The mesh process runs with the node flags `npm start` gives it.
export BENCH_CHILD_FLAGS="$AMF_NODE_FLAGS ${BENCH_CHILD_FLAGS:-}"

node --expose-gc bench/run.js
# The task path against BullMQ on Redis (issue 31): Debian's redis-server, started by the bench itself
# on a private port with a temporary directory (never the system's service).
ensure_debian_package 'redis-server --version && redis-cli --version' redis-server
node bench/taskPath.js
node bench/admission.js
node bench/mcp.js
# MCP with the official SDK client (1.x and 2.x) beside the worker's own /a2a (issue 31).
node bench/mcpSdk.js
node bench/a2a.js
node bench/startup.js
# Cross-host cost on the simulated LAN (needs root for network namespaces; says so and skips otherwise).
node bench/lan.js
