#!/usr/bin/env bash
# How long `dls plan` takes behind a shared full-duplex uplink and on one
# port, by workers and batch size:
#
#   scripts/plan-time.sh [DLS] ["P..."] ["LOADS..."]
#
# DLS defaults to target/release/dls (built first); P to "4 16 64", LOADS
# to "1000 10000 100000". Each star is deterministic (xorshift): links c
# of 10-50 ms a product, w of 5-100 ms, d half of c, latencies of 0-2 ms,
# and an uplink carrying 2.5 of the fastest links. Other stars of the same
# kind: STAR_SEED (1), STAR_SPREAD (links of 10·(1 + SPREAD·u) ms, 4) and
# STAR_CARRY (the uplink carries CARRY of the fastest link, 2.5) in the
# environment; STARS="SEED:SPREAD:CARRY ..." runs each of those stars in
# turn (a "# star" line before its rows). Prints, per star, load and port
# model, the command's wall time, the makespan it predicts and that over
# the steady-state bound.
# Nothing is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
dls=${1:-target/release/dls}
ps=${2:-4 16 64}
loads=${3:-1000 10000 100000}
[ "$dls" = target/release/dls ] && cargo build --release -q -p dls-master
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

star() { # p file
  python3 - "$1" >"$2" <<'EOF'
import os, sys
p = int(sys.argv[1])
seed = int(os.environ.get("STAR_SEED", "1"))
spread = float(os.environ.get("STAR_SPREAD", "4"))
carry = float(os.environ.get("STAR_CARRY", "2.5"))
x = (0x9E3779B97F4A7C15 * seed) % 2**64 or 1
def nxt():
    global x
    x ^= (x << 13) & (2**64 - 1); x ^= x >> 7; x ^= (x << 17) & (2**64 - 1)
    return (x >> 11) / 2**53
print('shape = [256, 256, 256]\ndtype = "float64"\n')
cs = []
for i in range(p):
    c, w = 0.01 * (1 + spread * nxt()), 0.005 + 0.095 * nxt()
    cs.append(c)
    print(f'[[worker]]\nname = "w{i}"\nc = {c}\nw = {w}\nd = {c / 2}')
    print(f'send_latency = {0.002 * nxt()}\ncompute_latency = {0.002 * nxt()}\nreturn_latency = {0.002 * nxt()}\n')
print(f'[uplink]\nsend = {min(cs) / carry}\nret = {min(cs) / (2 * carry)}\nduplex = true')
EOF
}

printf '%5s %8s %-7s %10s %12s %8s\n' p load ports "plan s" "makespan s" "/bound"
for triple in ${STARS:-default}; do
  if [ "$triple" != default ]; then
    [[ "$triple" =~ ^[0-9]+:[0-9]+([.][0-9]+)?:[0-9]+([.][0-9]+)?$ ]] ||
      { echo "STARS: \"$triple\" is not SEED:SPREAD:CARRY (a whole seed, two numbers)" >&2; exit 2; }
    IFS=: read -r STAR_SEED STAR_SPREAD STAR_CARRY <<<"$triple"
    export STAR_SEED STAR_SPREAD STAR_CARRY
    echo "# star $triple"
  fi
  for p in $ps; do
    star "$p" "$dir/star.toml"
    for load in $loads; do
      for ports in measured 1; do
        flag=()
        [ "$ports" = 1 ] && flag=(--ports 1)
        t0=$(date +%s.%N)
        out=$("$dls" plan --platform "$dir/star.toml" --load "$load" "${flag[@]}" --json)
        t1=$(date +%s.%N)
        echo "$out" | python3 -c "
import json, sys
d = json.load(sys.stdin)
print('%5d %8d %-7s %10.3f %12.3f %8.3f' % ($p, $load, '$ports', $t1 - $t0, d['makespan'], d['makespan_over_bound']))"
      done
    done
  done
done
