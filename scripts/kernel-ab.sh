#!/usr/bin/env bash
# Two builds of the worker daemon on the same batch, in turn, in one run:
#
#   scripts/kernel-ab.sh OLD_DLS_WORKER [NEW_DLS_WORKER] [SIZE] [BATCH] [ROUNDS]
#
# Starts two single-threaded workers from each binary on loopback, then
# runs `dls run --batch BATCH --size SIZE` (default 100 products of 512²
# float64, calibration inside the run) against the old pair and the new
# pair alternately, ROUNDS times (default 3). Prints, per run, the
# command's wall time, the makespan and the daemons' own compute time per
# product (`compute_secs / products` of the run's --json), then the
# medians and the ratio old/new. NEW defaults to target/release/dls-worker;
# the master is target/release/dls for both.
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?give the old dls-worker binary}
new=${2:-target/release/dls-worker}
size=${3:-512}
batch=${4:-100}
rounds=${5:-3}
cargo build --release -q -p dls-master -p dls-worker

dir=$(mktemp -d)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null; rm -rf "$dir"' EXIT
start() { # binary tag -> prints the two addresses
  local addrs=() a
  for i in 0 1; do
    "$1" --listen 127.0.0.1:0 --threads 1 >"$dir/$2$i.log" 2>&1 &
    PIDS+=($!)
  done
  for i in 0 1; do
    a=
    for _ in $(seq 100); do
      a=$(grep -ao 'listening on [0-9.:]*' "$dir/$2$i.log" | awk '{print $3}' || true)
      [[ -n "$a" ]] && break
      sleep 0.1
    done
    [[ -n "$a" ]] || { echo "worker $2$i did not start: $(cat "$dir/$2$i.log")" >&2; exit 1; }
    addrs+=("$a")
  done
  (IFS=,; echo "${addrs[*]}")
}
start "$old" old >"$dir/old.addrs"
start "$new" new >"$dir/new.addrs"

run() { # tag -> "wall makespan secs_per_product"
  local t0 t1
  t0=$(date +%s.%N)
  target/release/dls run --workers "$(cat "$dir/$1.addrs")" --batch "$batch" --size "$size" --json >"$dir/$1.json" 2>/dev/null
  t1=$(date +%s.%N)
  python3 - "$dir/$1.json" "$t0" "$t1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
w = [x for x in d["workers"] if x["products"]]
per = sum(x["compute_secs"] for x in w) / sum(x["products"] for x in w)
print(f"{float(sys.argv[3]) - float(sys.argv[2]):.3f} {d['measured_makespan']:.3f} {per * 1e3:.3f}")
EOF
}

printf '%-4s %6s %10s %10s %16s\n' build round "wall s" "makespan s" "compute ms/prod"
for r in $(seq "$rounds"); do
  for tag in old new; do
    read -r wall mk per < <(run "$tag")
    printf '%-4s %6d %10.3f %10.3f %16.3f\n' "$tag" "$r" "$wall" "$mk" "$per"
    echo "$tag $wall $mk $per" >>"$dir/all"
  done
done
python3 - "$dir/all" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {t: [statistics.median(float(r[i]) for r in rows if r[0] == t) for i in (1, 2, 3)] for t in ("old", "new")}
for t in ("old", "new"):
    print(f"median {t}: wall {med[t][0]:.3f} s, makespan {med[t][1]:.3f} s, compute {med[t][2]:.3f} ms/product")
o, n = med["old"], med["new"]
print(f"old/new: wall {o[0] / n[0]:.2f}x, makespan {o[1] / n[1]:.2f}x, compute per product {o[2] / n[2]:.2f}x")
EOF
