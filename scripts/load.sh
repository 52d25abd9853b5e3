#!/usr/bin/env bash
# Load harness (see BENCHMARKS.md): logins through POST /verify-authentication with pre-signed
# assertions, signer operations over REST, and sign-in options, each with wrk for a fixed time.
# Start the server with limits that do not throttle one client address, e.g.:
#   .build/release/keyfob serve --ip-rate 100000000 --ip-burst 100000000 --signups-per-hour 100000000 \
#     --max-challenges-per-ip 100000000 --challenge-timeout 600 --sign-rate 100000000
#   scripts/load.sh http://127.0.0.1:8080
set -euo pipefail
URL=${1:-http://127.0.0.1:8080}
ORIGIN=${ORIGIN:-http://localhost:8080}
SECONDS_EACH=${SECONDS_EACH:-10}
CONNECTIONS=${CONNECTIONS:-32}
LOGINS=${LOGINS:-30000}
OUT=${OUT:-/tmp/keyfob-load}
here="$(cd "$(dirname "$0")" && pwd)"
python3 "$here/load/prepare.py" "$URL" --origin "$ORIGIN" --users 100 --logins "$LOGINS" --out "$OUT"
# sign_event first: the logins below start up to 50 sessions per user, and the oldest (the token
# used here) would end.
echo "== POST /api/signer/sign_event =="
echo '{"event":{"kind":1,"content":"load test note","tags":[]}}' > "$OUT/sign.jsonl"
BODIES="$OUT/sign.jsonl" TOKEN="$(head -1 "$OUT/tokens.txt")" wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" -s "$here/load/replay.lua" "$URL/api/signer/sign_event"
echo "== POST /verify-authentication (each body once) =="
BODIES="$OUT/logins.jsonl" THREADS=2 wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" -s "$here/load/replay.lua" "$URL/verify-authentication"
echo "== GET /generate-authentication-options =="
wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" "$URL/generate-authentication-options"
echo "== GET /healthz (ceiling: the same stack, almost no work) =="
wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" "$URL/healthz"
