#!/usr/bin/env bash
# The plan `dls plan --json` predicts on every committed platform file, one
# line each: file, load, port model, strategy, makespan, bound. Two builds'
# outputs compared line by line show what a change to the planner moved:
#
#   scripts/predictions.sh [DLS] [LOADS] > before.txt
#   scripts/predictions.sh OTHER_DLS [LOADS] > after.txt
#   scripts/predictions.sh --compare before.txt after.txt
#
# DLS defaults to target/release/dls (built first), LOADS to "40 3000".
# A file dls refuses prints its error on the line instead of numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --compare ]; then
  python3 - "$2" "$3" <<'PY'
import sys
def read(f):
    out = {}
    for line in open(f):
        k, _, v = line.rstrip("\n").rpartition(" | ")
        out[k] = v
    return out
a, b = read(sys.argv[1]), read(sys.argv[2])
moved, worst = 0, (0.0, "")
for k in sorted(a):
    if k not in b:
        print("missing:", k); moved += 1; continue
    if a[k] == b[k]:
        continue
    try:
        x, y = float(a[k].split()[0]), float(b[k].split()[0])
        rel = y / x - 1
    except ValueError:
        rel = float("inf")
    moved += 1
    if abs(rel) > abs(worst[0]):
        worst = (rel, k)
    print(f"{rel:+.4%}  {k}: {a[k]} -> {b[k]}")
print(f"{moved} of {len(a)} predictions moved; largest {worst[0]:+.4%} ({worst[1]})")
PY
  exit
fi
dls=${1:-target/release/dls}
loads=${2:-40 3000}
[ "$dls" = target/release/dls ] && cargo build --release -q -p dls-master
err=$(mktemp)
trap 'rm -f "$err"' EXIT
find . -path ./target -prune -o -name '*.toml' -print | sort | xargs grep -l '^\[\[worker\]\]' |
  while read -r f; do
    for load in $loads; do
      if out=$("$dls" plan --platform "$f" --load "$load" --json 2>"$err"); then
        echo "$out" | python3 -c "
import json, sys
d = json.load(sys.stdin)
print('$f $load %s %s | %.9g %.9g' % (d['ports'], d['strategy'], d['makespan'], d['bound']))"
      else
        echo "$f $load | error: $(head -1 "$err")"
      fi
    done
  done
