#!/usr/bin/env bash
# How well costs calibrated at other sizes predict a run: four emulated
# dls-worker daemons on loopback (unequal link rates and slowdowns),
# calibrated at two sizes (`dls calibrate --sizes`) and, for comparison, at
# the run's own size; then the same batch run REPS times with each platform
# file. Prints measured/predicted per run and the medians.
#
#   scripts/scaling-accuracy.sh [SIZES] [N] [BATCH] [REPS]
#
# Defaults: SIZES 64,256, N 128, BATCH 600, REPS 3. Uses target/release
# (built if missing); the workers are killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${1:-64,256}
N=${2:-128}
BATCH=${3:-600}
REPS=${4:-3}
[[ -x target/release/dls && -x target/release/dls-worker ]] || cargo build --release --bin dls --bin dls-worker
DIR=${KEEP_DIR:-$(mktemp -d)}
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [[ -n "${KEEP_DIR:-}" ]] || rm -rf "$DIR"
}
trap cleanup EXIT
# each worker's link rate (MB/s) and slowdown
source scripts/local-workers.sh
start_workers "$DIR" "--threads 1 --link-rate 200 --slowdown 2" "--threads 1" \
  "--threads 1 --link-rate 100 --slowdown 3" "--threads 1 --link-rate 400 --slowdown 1.5"
W=$WORKERS
timeout 600 target/release/dls calibrate --workers "$W" --sizes "$SIZES" -o "$DIR/scaled.toml" 2>"$DIR/cal1.err"
timeout 600 target/release/dls calibrate --workers "$W" --size "$N" -o "$DIR/direct.toml" 2>"$DIR/cal2.err"
for r in $(seq "$REPS"); do
  for p in scaled direct; do
    timeout 600 target/release/dls run --workers "$W" --platform "$DIR/$p.toml" --batch "$BATCH" --size "$N" \
      --verify 1 --json >"$DIR/$p-$r.json" 2>>"$DIR/run.err"
  done
done
python3 - "$DIR" "$REPS" "$SIZES" "$N" "$BATCH" <<'EOF'
import json, statistics, sys
d, reps, sizes, n, batch = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
print(f"{batch} products of {n}x{n} float64 on 4 emulated workers, {reps} runs each")
for p, what in (("scaled", f"calibrated at {sizes}, rescaled"), ("direct", f"calibrated at {n}")):
    ratios = []
    for r in range(1, reps + 1):
        j = json.load(open(f"{d}/{p}-{r}.json"))
        ratios.append(j["measured_makespan"] / j["predicted_makespan"])
        print(f"  {what:32} run {r}: predicted {j['predicted_makespan']:.3f} s, measured {j['measured_makespan']:.3f} s, ratio {ratios[-1]:.3f}")
    print(f"  {what:32} median measured/predicted {statistics.median(ratios):.3f}")
EOF
