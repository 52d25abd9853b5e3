#!/usr/bin/env bash
# Load harness (BENCHMARKS.md has the figures and how to read them).
#
#   scripts/load.sh            starts its own release server (.build/release/keyfob, port 18080, a
#                              fresh data folder under $OUT, limits raised, --bench-echo), runs
#                              everything below and stops the server. `make load` builds first.
#   scripts/load.sh URL        the same against a server you run. Give it KEYFOB_PID for the CPU
#                              and memory figures; it needs --bench-echo for the ceiling runs and
#                              limits that do not throttle one client address (see start_server).
#
# Runs, each for SECONDS_EACH with wrk: the ceiling (POST /bench/echo with a login-sized body),
# POST /api/signer/sign_event (bearer tokens of USERS accounts), POST /verify-authentication
# (pre-signed assertions, each sent once) at CONNECTIONS and at 256 connections, the GET ceiling,
# and GET /generate-authentication-options. Each prints requests/s, p50/p99/p99.9 latency, non-2xx
# answers (a run with any is invalid), the server's CPU use and peak RSS.
#
#   SECONDS_EACH=10 CONNECTIONS=32 USERS=1000 CREDENTIALS=0 (filler passkeys seeded before the run)
#   PROFILE=1: perf record -g of the server during each run, into $OUT/<run>.perf.data
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
SECONDS_EACH=${SECONDS_EACH:-10}
CONNECTIONS=${CONNECTIONS:-32}
USERS=${USERS:-1000}
CREDENTIALS=${CREDENTIALS:-0}
# Enough signed logins for two runs at up to 7,000 logins/s each (the best seen is ~4,600): every
# one left over is a live ceremony the server holds through the options run, and it shows in
# peak RSS. A run that uses them all up says so.
LOGINS=${LOGINS:-$((SECONDS_EACH * 7000 * 2))}
OUT=${OUT:-/tmp/keyfob-load}
PORT=${PORT:-18080}
KEYFOB=${KEYFOB:-$root/.build/release/keyfob}
URL=${1:-}
server_pid=""

start_server() {
  "$KEYFOB" serve --port "$PORT" --data-dir "$OUT/data" ${DATABASE:+--database "$DATABASE"} --public-dir "$root/Public" --bench-echo \
    --ip-rate 100000000 --ip-burst 100000000 --signups-per-hour 100000000 --trusted-proxy 127.0.0.1 \
    --challenge-timeout 600 --max-live-challenges 1000000 --sign-rate 100000000 >"$OUT/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$server_pid" 2>/dev/null || { cat "$OUT/server.log"; exit 1; }
    sleep 0.1
  done
  echo "the server did not answer /healthz; its log: $OUT/server.log"; exit 1
}
stop_server() {
  [ -n "$server_pid" ] || return 0
  kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

if [ -z "$URL" ]; then
  [ -x "$KEYFOB" ] || { echo "no $KEYFOB: run 'swift build -c release --product keyfob' (or make load)"; exit 1; }
  rm -rf "$OUT"; mkdir -p "$OUT/data"
  trap stop_server EXIT
  start_server
  if [ "$CREDENTIALS" -gt 0 ]; then
    stop_server
    python3 "$here/load/seed.py" "$OUT/data/keyfob.sqlite" "$CREDENTIALS"
    start_server
  fi
  URL="http://127.0.0.1:$PORT"
  KEYFOB_PID=$server_pid
else
  mkdir -p "$OUT"
fi
ORIGIN=${ORIGIN:-http://localhost:${URL##*:}}
PID=${KEYFOB_PID:-}

python3 "$here/load/prepare.py" "$URL" --origin "$ORIGIN" --users "$USERS" --logins "$LOGINS" --out "$OUT"
half=$((LOGINS / 2))
head -n "$half" "$OUT/logins.jsonl" >"$OUT/logins-a.jsonl"
tail -n +"$((half + 1))" "$OUT/logins.jsonl" >"$OUT/logins-b.jsonl"
head -n 1 "$OUT/logins.jsonl" >"$OUT/echo.jsonl"
echo '{"event":{"kind":1,"content":"load test note","tags":[]}}' >"$OUT/sign.jsonl"

ticks() { [ -n "$PID" ] && awk '{print $14 + $15}' "/proc/$PID/stat" || echo 0; }
peak_rss() { [ -n "$PID" ] && awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$PID/status" || echo "?"; }
hz=$(getconf CLK_TCK)
printf '%-34s %9s %8s %8s %8s %7s %6s %8s\n' run "req/s" "p50 ms" "p99 ms" "p99.9" "non-2xx" cores "peak MB" >"$OUT/summary.txt"

# measure NAME CONNECTIONS PATH [VAR=value ...]: one wrk run, one summary line.
measure() {
  local name=$1 connections=$2 path=$3; shift 3
  local before after line file=${name//[^A-Za-z0-9]/_} perf_pid=""
  if [ -n "${PROFILE:-}" ] && [ -n "$PID" ]; then
    perf record -e cpu-clock -F 999 -g -p "$PID" -o "$OUT/$file.perf.data" -- sleep "$SECONDS_EACH" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  before=$(ticks)
  line=$(env "$@" wrk -t2 -c"$connections" -d"${SECONDS_EACH}s" --latency -s "$here/load/replay.lua" "$URL$path" \
    | tee "$OUT/$file.txt" | grep '^RESULT')
  after=$(ticks)
  [ -z "$perf_pid" ] || wait "$perf_pid" || true
  read -r _ rps p50 p99 p999 status errors duration <<<"$line"
  local cores
  cores=$(awk -v t=$((after - before)) -v hz="$hz" -v d="$duration" 'BEGIN { printf "%.2f", t / hz / d }')
  [ -n "$PID" ] || cores="?"
  printf '%-34s %9s %8s %8s %8s %7s %6s %8s\n' "$name" "$rps" "$p50" "$p99" "$p999" "$((status + errors))" "$cores" \
    "$(peak_rss)" | tee -a "$OUT/summary.txt"
  echo "$rps" >"$OUT/$file.rps"
  local limit="" arg
  for arg in "$@"; do case $arg in LIMIT=*) limit=${arg#LIMIT=} ;; esac; done
  if [ -n "$limit" ] && awk -v r="$rps" -v d="$duration" -v n="$limit" 'BEGIN { exit !(r * d >= 0.98 * n) }'; then
    echo "   ^ used up its $limit pre-signed logins before the time was over: the figure is low; raise LOGINS" \
      | tee -a "$OUT/summary.txt"
  fi
}

echo "== each run ${SECONDS_EACH}s, 2 wrk threads =="
measure "ceiling POST /bench/echo" "$CONNECTIONS" /bench/echo BODIES="$OUT/echo.jsonl"
# sign_event before the logins: those start many sessions per user and the oldest (these tokens) end.
measure "POST /api/signer/sign_event" "$CONNECTIONS" /api/signer/sign_event BODIES="$OUT/sign.jsonl" TOKENS="$OUT/tokens.txt"
measure "POST /verify-authentication" "$CONNECTIONS" /verify-authentication BODIES="$OUT/logins-a.jsonl" THREADS=2 LIMIT="$half"
measure "POST /verify-authentication c256" 256 /verify-authentication BODIES="$OUT/logins-b.jsonl" THREADS=2 LIMIT="$((LOGINS - half))"
measure "ceiling GET /bench/echo" "$CONNECTIONS" /bench/echo
# Options from many client addresses (X-Forwarded-For through the trusted proxy 127.0.0.1): each
# address may hold --max-challenges-per-ip unfinished ceremonies, as real clients do.
measure "GET /generate-authentication-opt" "$CONNECTIONS" /generate-authentication-options SPREAD=1
rps() { cat "$OUT/${1//[^A-Za-z0-9]/_}.rps"; }
ratio() { awk -v a="$(rps "$1")" -v b="$(rps "$2")" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }
{
  echo
  echo "logins / POST ceiling:     $(ratio "POST /verify-authentication" "ceiling POST /bench/echo")"
  echo "sign_event / POST ceiling: $(ratio "POST /api/signer/sign_event" "ceiling POST /bench/echo")"
  echo "options / GET ceiling:     $(ratio "GET /generate-authentication-opt" "ceiling GET /bench/echo")"
  echo "stored passkeys: $((USERS + CREDENTIALS)); logs and raw wrk output in $OUT"
} | tee -a "$OUT/summary.txt"
