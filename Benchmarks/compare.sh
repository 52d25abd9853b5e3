#!/usr/bin/env bash
# Runs the WebAuthn benchmarks and `openssl speed` on this machine, and prints
# each end-to-end figure as a ratio of the raw OpenSSL operation it rests on.
set -euo pipefail
cd "$(dirname "$0")"
raw=$(openssl speed -seconds 3 -elapsed ecdsap256 rsa2048 ed25519 2>/dev/null)
p256=$(awk '/256 bits ecdsa \(nistp256\)/ {print $NF}' <<<"$raw")
rsa=$(awk '/^rsa 2048 bits/ {print $NF}' <<<"$raw")
ed=$(awk '/253 bits EdDSA \(Ed25519\)/ {print $NF}' <<<"$raw")
cc -O2 raw/secp256k1.c -o /tmp/keyfob-secp-raw $(pkg-config --cflags --libs libsecp256k1)
secp=$(/tmp/keyfob-secp-raw)
ssign=$(awk '/^sign/ {print $2}' <<<"$secp"); sverify=$(awk '/^verify/ {print $2}' <<<"$secp"); secdh=$(awk '/^ecdh/ {print $2}' <<<"$secp")
# schnorrkel (Rust, through py-sr25519-bindings: a thin binding, so this slightly undercounts it).
schnorrkel=$(../scripts/python - <<'PY'
import timeit, sr25519
public, secret = sr25519.pair_from_seed(bytes([7] * 32))
message = bytes(138)  # about the size of a transfer's signing payload
signature = sr25519.sign((public, secret), message)
for name, run in (("sign", lambda: sr25519.sign((public, secret), message)), ("verify", lambda: sr25519.verify(signature, message, public))):
    runs = 3000
    print(name, int(runs / min(timeit.repeat(run, number=runs, repeat=3))))
PY
)
srsign=$(awk '/^sign/ {print $2}' <<<"$schnorrkel"); srverify=$(awk '/^verify/ {print $2}' <<<"$schnorrkel")
swift package benchmark --format markdown --no-progress < /dev/null > /tmp/keyfob-bench.md 2>/dev/null
# p50 throughput in ops/s (the table prints thousands when its row says "(K)").
p50() { awk -v name="$1" '$0 ~ "^### " name {f=1} f && /Throughput/ {k = ($0 ~ /\(K\)/) ? 1000 : 1; gsub(/ /,""); split($0,a,"|"); print a[5] * k; exit}' /tmp/keyfob-bench.md; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }
cat /tmp/keyfob-bench.md
echo
echo "| operation | keyfob p50 (ops/s) | raw OpenSSL verify (ops/s) | ratio |"
echo "|---|---|---|---|"
for row in "ES256 assertion verify (end to end)|$p256" "ES256 signature verify only (cached key)|$p256" \
           "RS256 assertion verify (end to end)|$rsa" "EdDSA assertion verify (end to end)|$ed"; do
  name=${row%|*}; base=${row##*|}
  ours=$(p50 "$(sed 's/[()]/./g' <<<"$name")")
  echo "| $name | $ours | $base | $(ratio "$ours" "$base") |"
done
echo
echo "| operation | keyfob p50 (ops/s) | raw libsecp256k1 (ops/s) | ratio |"
echo "|---|---|---|---|"
for row in "event id + sign|$ssign|schnorrsig_sign32, keypair ready" "event verify (id + signature)|$sverify|xonly parse + schnorrsig_verify" \
           "NIP-44 encrypt 1 KiB|$secdh|pubkey parse + ecdh" "NIP-44 decrypt 1 KiB|$secdh|pubkey parse + ecdh" \
           "NIP-04 encrypt 1 KiB|$secdh|pubkey parse + ecdh" "NIP-04 decrypt 1 KiB|$secdh|pubkey parse + ecdh"; do
  IFS='|' read -r name base what <<<"$row"
  ours=$(p50 "$(sed 's/[()+]/./g' <<<"$name")")
  echo "| $name | $ours | $base ($what) | $(ratio "$ours" "$base") |"
done
echo
echo "| operation | keyfob p50 (ops/s) | schnorrkel via py-sr25519-bindings (ops/s) | ratio |"
echo "|---|---|---|---|"
for row in "sr25519 sign (payload)|$srsign" "sr25519 verify (payload)|$srverify"; do
  IFS='|' read -r name base <<<"$row"
  ours=$(p50 "$(sed 's/[()]/./g' <<<"$name")")
  echo "| $name | $ours | $base | $(ratio "$ours" "$base") |"
done
