#!/usr/bin/env bash
# Two builds of `dls` on the same platform, in turn: one calibration,
# then warm runs (with it) and cold runs (without), alternating binaries,
# so that a change is measured against the build before it on the same
# nodes within minutes. Meant to run inside the test bed:
#
#   sudo DLS_TESTBED_SWITCH=500 DLS_TESTBED_CAP=process \
#     scripts/testbed.sh a:120:10 b:240:20 c:360:30 d:480:40 -- \
#     scripts/ab.sh OLD_DLS NEW_DLS SIZE BATCH [REPS]
#
# OLD_DLS and NEW_DLS are paths of `dls` binaries (build the older one
# from a worktree with its own CARGO_TARGET_DIR). Prints each run's wall
# seconds and measured/predicted. The cluster is $DLS_TESTBED_CLUSTER.
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 OLD_DLS NEW_DLS SIZE BATCH [REPS]" >&2; exit 2; }
OLD=$1 NEW=$2 SIZE=$3 BATCH=$4 REPS=${5:-3}
C=${DLS_TESTBED_CLUSTER:?run inside scripts/testbed.sh}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
timeout 600 "$NEW" calibrate --cluster "$C" --size "$SIZE" -o "$DIR/p.toml" >"$DIR/cal.log" 2>&1 ||
  { cat "$DIR/cal.log"; exit 1; }
grep ports "$DIR/cal.log" || true
run() { # label binary [args]: wall seconds and measured/predicted of one run
  local label=$1 bin=$2 t0 t1
  shift 2
  t0=$(date +%s.%N)
  timeout 600 "$bin" run --cluster "$C" --size "$SIZE" --batch "$BATCH" "$@" >"$DIR/run.log" 2>&1
  t1=$(date +%s.%N)
  echo "$label: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') s" \
    "($(grep -o 'measured/predicted [0-9.]*' "$DIR/run.log" || echo 'no summary'))"
}
for _ in $(seq "$REPS"); do
  run "old warm" "$OLD" --platform "$DIR/p.toml"
  run "new warm" "$NEW" --platform "$DIR/p.toml"
done
for _ in $(seq "$REPS"); do
  run "old cold" "$OLD"
  run "new cold" "$NEW"
done
