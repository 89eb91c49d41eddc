#!/usr/bin/env bash
# Starts a local 3-node NATS JetStream cluster for one AMF mesh and runs it until Ctrl-C (or SIGTERM).
# Each node has its own store dir under DIR, routes on loopback, and the per-role users and ACLs of
# the single server `amf up` spawns (credentials from <data-dir>/credentials.json). Then:
#   amf up --data-dir DATA_DIR --nats-url <printed URLs>      (with nats.replicas: 3 in amf.yaml)
# Usage: scripts/cluster.sh [--dir DIR] [--data-dir DATA_DIR] [--nodes N] [--client-port P] [--route-port P]
#                           [--no-auth-callout]
#   --dir          where node stores and configs live (default DATA_DIR/cluster)
#   --data-dir     the mesh's data dir (default $AMF_DATA_DIR or ~/.amf)
#   --client-port  first client port, one per node upward (default 4222)
#   --route-port   first route port, one per node upward (default 6222)
#   --no-auth-callout  no NATS auth callout: agents then share the legacy specialist user
# By default the nodes ask the coordinators about every login but the role users' (auth callout), so
# each admitted agent gets its own NATS user; the issuer key is DATA_DIR/callout.nkey.
# The nats-server binary: $AMF_NATS_CLUSTER_BIN, else the one scripts/install-nats.sh pins (installed
# on first use).
set -euo pipefail
cd "$(dirname "$0")/.."

data_dir="${AMF_DATA_DIR:-$HOME/.amf}"
dir=""
nodes=3
client_port=4222
route_port=6222
callout=(--auth-callout)
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --data-dir) data_dir="$2"; shift 2 ;;
    --nodes) nodes="$2"; shift 2 ;;
    --client-port) client_port="$2"; shift 2 ;;
    --route-port) route_port="$2"; shift 2 ;;
    --no-auth-callout) callout=(); shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "cluster.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
dir="${dir:-$data_dir/cluster}"

binary="${AMF_NATS_CLUSTER_BIN:-}"
if [ -z "$binary" ]; then binary="$(bash scripts/install-nats.sh)"; fi
if [ ! -f dist/fabric/natsServer/cluster.js ]; then npm run --silent build; fi

pids=()
# shellcheck disable=SC2317 # called by the trap below, which shellcheck cannot see
stop() {
  trap - INT TERM EXIT
  # SIGTERM lets each node leave the cluster cleanly; wait so Ctrl-C returns only once all are gone.
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
}
trap stop INT TERM EXIT

urls=""
logs=()
while read -r name conf; do
  if [ "$name" = URLS ]; then urls="$conf"; continue; fi
  if [ "$name" = CALLOUT ]; then echo "==> auth callout: issuer $conf"; continue; fi
  node_dir="$(dirname "$conf")"
  "$binary" -c "$conf" >"$node_dir/nats-server.log" 2>&1 &
  pids+=("$!")
  logs+=("$node_dir/nats-server.log")
  echo "==> $name (pid $!) log: $node_dir/nats-server.log"
done < <(node scripts/cluster-config.mjs --dir "$dir" --data-dir "$data_dir" --nodes "$nodes" \
  --client-port "$client_port" --route-port "$route_port" "${callout[@]}")

if [ -z "$urls" ]; then
  echo "cluster.sh: scripts/cluster-config.mjs wrote no configs (see its error above)" >&2
  exit 1
fi
echo "NATS cluster ($nodes nodes, $("$binary" --version)) client URLs:"
echo "  $urls"
echo "Connect a coordinator:  amf up --data-dir $data_dir --nats-url $urls"
echo "(set nats.replicas: 3 in $data_dir/amf.yaml so streams and KV are replicated; on this machine,"
echo " nats.server_logs: [$(IFS=,; echo "${logs[*]}")] there turns the nodes' permission refusals into warnings)."
echo "Ctrl-C stops."
# Returns when any node exits; the EXIT trap then stops the others.
wait -n "${pids[@]}"
echo "cluster.sh: a node exited; stopping the cluster (see the logs under $dir)" >&2
exit 1
