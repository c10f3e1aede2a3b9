#!/usr/bin/env bash
# Load test: `casebook serve --workers 2` on localhost, driven by wrk (benchmarks/load.lua) for DURATION
# seconds with the mixed profile (lists, gets, search, HTML pages, single calculations, a 1,000-point sweep,
# MCP tools/call), then single kv-cache calculations. With TYPES=1, each request type alone for a few
# seconds too, to see which are slow. Installs wrk from Debian if missing.
#
# The load generator runs on the same machine as the server and shares its cores: the figures are for
# server + client together on this machine, not for the server alone.
#
# Usage: benchmarks/load.sh [DURATION_S] [CONNECTIONS]      (env: PORT, WORKERS, TYPES=1, SHOW_ERRORS=1)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-60}
CONNS=${2:-16}
PORT=${PORT:-8765}
WORKERS=${WORKERS:-2}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
.venv/bin/casebook build >/dev/null
.venv/bin/casebook serve --workers "$WORKERS" --port "$PORT" --no-access-log --log-level warning &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null || { echo "the server did not start" >&2; exit 1; }

# warm every worker before measuring: the first MCP call imports the SDK, the first roofline loads the
# measured tables, templates compile, caches fill (many connections, so that every worker gets some)
MIX=mixed wrk -t1 -c"$(( CONNS > 8 ? CONNS : 8 ))" -d8s --timeout 20s -s benchmarks/load.lua "http://127.0.0.1:$PORT" >/dev/null

echo "machine: $(nproc) cores shared by $WORKERS server workers and wrk (1 thread, $CONNS connections); $(date -u +%FT%TZ)"
echo "goal (mixed): >= 1000 requests/s, p99 < 50 ms, 0 errors"
server_cpu_ticks() {  # CPU time (user + system, clock ticks) of the server and its worker processes so far
  local total=0 pid
  for pid in $SERVER $(pgrep -P "$SERVER"); do
    [ -r "/proc/$pid/stat" ] && total=$(( total + $(awk '{print $14 + $15}' "/proc/$pid/stat") ))
  done
  echo "$total"
}
run() {  # run MIX SECONDS: wrk's summary, then the server's CPU per request (a figure the machine's noise
         # changes much less than latency: what the server would do with the cores to itself)
  local before after out n hz
  hz=$(getconf CLK_TCK)
  before=$(server_cpu_ticks)
  out=$(MIX=$1 wrk -t1 -c"$CONNS" -d"${2}s" --latency -s benchmarks/load.lua "http://127.0.0.1:$PORT" | grep -E "^RESULT")
  after=$(server_cpu_ticks)
  echo "$out"
  n=$(echo "$out" | sed -E 's/.* requests=([0-9]+).*/\1/')
  awk -v t=$(( after - before )) -v hz="$hz" -v n="$n" -v c="$(nproc)" -v m="$1" 'BEGIN { if (n > 0) printf \
    "  server CPU mix=%s: %.2f ms per request (%.1f s over %d requests): %d cores to the server alone would give ~%.0f requests/s\n", \
    m, 1000 * t / hz / n, t / hz, n, c, c * n * hz / (t > 0 ? t : 1) }'
}
run mixed "$DURATION"
run kv "$(( DURATION < 10 ? DURATION : 10 ))"
if [ "${TYPES:-0}" = "1" ]; then
  for mix in list get search html calc sweep mcp schema; do run "$mix" 5; done
fi
