#!/usr/bin/env bash
# How long `dls calibrate` takes, and what a cold `dls run` (no platform:
# calibration inside the run) costs against a warm one (a platform file).
#
#   scripts/calibration-speed.sh [COUNT] [SIZE] [BATCH]
#
# Part 1: COUNT plain loopback daemons (default 32), `dls calibrate
# --size SIZE` (default 256) three times, wall seconds each.
# Part 2: four emulated workers (links of 60, 120, 30 and 90 MB/s,
# slowdowns 4, 8, 2, 6), a batch of BATCH products (default 1500) run
# warm (with the platform calibration wrote) and cold, twice each: wall
# seconds and their ratio. Uses target/release (built if missing). Stops
# by itself: every command is bounded by `timeout`, workers are killed
# on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${1:-32}
SIZE=${2:-256}
BATCH=${3:-1500}
[[ -x target/release/dls && -x target/release/dls-worker ]] ||
  cargo build --release -p dls-master -p dls-worker
# shellcheck source=scripts/local-workers.sh
source scripts/local-workers.sh
PIDS=()
DIR=$(mktemp -d)
trap 'kill "${PIDS[@]}" 2>/dev/null || true; rm -rf "$DIR"' EXIT

wall() { # wall seconds of a command, its output discarded
  local t0 t1
  t0=$(date +%s.%N)
  timeout 600 "$@" >/dev/null 2>&1
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'
}

specs=()
for _ in $(seq "$COUNT"); do specs+=(""); done
start_workers "$DIR" "${specs[@]}"
for r in 1 2 3; do
  echo "calibrate $COUNT loopback workers, n=$SIZE: $(wall target/release/dls calibrate --workers "$WORKERS" --size "$SIZE" -o "$DIR/p.toml") s (run $r)"
done
# Wait for them to exit: a daemon still shutting down would write its
# last lines into the log of the worker started under its name below.
kill "${PIDS[@]}" 2>/dev/null || true
wait "${PIDS[@]}" 2>/dev/null || true
PIDS=()
mkdir -p "$DIR/emulated"

start_workers "$DIR/emulated" "--link-rate 60 --slowdown 4" "--link-rate 120 --slowdown 8" \
  "--link-rate 30 --slowdown 2" "--link-rate 90 --slowdown 6"
echo "calibrate 4 emulated workers, n=$SIZE: $(wall target/release/dls calibrate --workers "$WORKERS" --size "$SIZE" -o "$DIR/p.toml") s"
for r in 1 2; do
  warm=$(wall target/release/dls run --workers "$WORKERS" --size "$SIZE" --batch "$BATCH" --platform "$DIR/p.toml" --verify 0)
  cold=$(wall target/release/dls run --workers "$WORKERS" --size "$SIZE" --batch "$BATCH" --verify 0)
  echo "batch of $BATCH: warm $warm s, cold $cold s, cold/warm $(awk -v a="$cold" -v b="$warm" 'BEGIN { printf "%.3f", a / b }') (run $r)"
done
