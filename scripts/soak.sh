#!/usr/bin/env bash
# Soak test, not part of the default test run.
#
#   scripts/soak.sh [RUNS] [KILLS_PER_RUN]
#
# Starts 32 dls-worker daemons on 127.0.0.1, then RUNS times: runs a batch of
# 20,000 products of size 32 (calibrating first), kills KILLS_PER_RUN random
# workers with SIGKILL while it runs (after calibrating once), and checks that the run still succeeds
# with every verified product correct, that it reports its losses, and that
# the master's peak memory stays within 1.5 × (inputs + outputs). Killed
# workers are restarted on the same port before the next run. Everything is
# on loopback; every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
KILLS=${2:-3}
P=32
M=20000
N=32
BASE_PORT=${DLS_SOAK_PORT:-17100}
work=$(mktemp -d)
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

cargo build --release -q -p dls-master -p dls-worker
bin=target/release

start_worker() { # index
  local i=$1
  "$bin/dls-worker" --listen "127.0.0.1:$((BASE_PORT + i))" --threads 1 >"$work/w$i.out" 2>"$work/w$i.err" &
  pids[$i]=$!
  disown "$!" # no job-control chatter when it is killed
}

for ((i = 0; i < P; i++)); do start_worker "$i"; done
sleep 1
list=$(for ((i = 0; i < P; i++)); do printf '127.0.0.1:%d,' $((BASE_PORT + i)); done)
list=${list%,}
limit=$(python3 -c "print(int(1.5 * 3 * $M * $N * $N * 8))")
# Calibrate once, so that each run starts computing at once and the kills
# land while it runs.
"$bin/dls" calibrate --workers "$list" --size $N -o "$work/platform.toml" 2>"$work/calibrate.err"

for ((run = 1; run <= RUNS; run++)); do
  "$bin/dls" run --workers "$list" --platform "$work/platform.toml" --batch $M --size $N --seed "$run" --verify 200 --json \
    >"$work/run.json" 2>"$work/run.err" &
  master=$!
  victims=$(python3 -c "import random; print(' '.join(map(str, random.sample(range($P), $KILLS))))")
  sleep "$(python3 -c 'import random; print(round(random.uniform(0.05, 0.3), 3))')"
  for v in $victims; do kill -9 "${pids[$v]}" 2>/dev/null || true; done
  if ! wait "$master"; then
    echo "run $run FAILED:"; cat "$work/run.err"; exit 1
  fi
  python3 - "$work/run.json" "$limit" "$run" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); limit = int(sys.argv[2]); run = sys.argv[3]
assert r["verified"] == 200, r["verified"]
assert sum(w["load"] for w in r["workers"]) == r["load"] == 20000
rss = r.get("master_peak_rss_bytes")
assert rss is None or rss <= limit, f"master peak RSS {rss} > {limit}"
print(f"run {run}: ok, measured {r['measured_makespan']:.2f} s (predicted {r['predicted_makespan']:.2f} s), "
      f"{len(r['failures'])} worker(s) lost, {sum(f['products_lost'] for f in r['failures'])} product(s) redone "
      f"in {len(r['replans'])} round(s), master peak RSS {rss / 1e6 if rss else float('nan'):.0f} MB (limit {limit / 1e6:.0f} MB)")
PY
  for v in $victims; do start_worker "$v"; done
  sleep 1
done
echo "soak: $RUNS run(s) complete and verified"
