#!/usr/bin/env bash
# Load test: `casebook serve --workers 2` on localhost, driven by wrk for DURATION seconds with a
# mixed workload, then with single kv-cache calculations. Installs wrk from Debian if missing.
# Usage: benchmarks/load.sh [DURATION_S] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-60}
CONNS=${2:-8}
PORT=${PORT:-8765}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
.venv/bin/casebook build >/dev/null
.venv/bin/casebook serve --workers 2 --port "$PORT" --no-access-log --log-level warning &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done
# wrk uses one thread here so that the two server workers keep the two cores.
for mix in mixed kv; do
  MIX=$mix wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -s benchmarks/load.lua "http://127.0.0.1:$PORT" | grep -E "RESULT|Latency|Req/Sec|Non-2xx"
done
