#!/usr/bin/env bash
# What a user waits for, against the makespan every other figure reports:
# `dls run` of M products over p loopback workers with emulated links,
# cold (no platform: calibration inside the run), warm (a platform file
# from one `dls calibrate`) and warm on one port (`--ports 1`).
#
#   scripts/time-to-result.sh [SIZE] ["P..."] ["M..."] ["N..."]
#
# SIZE defaults to 32 (products of SIZE² float64), P to "4 16 64", M to
# "1000 10000 100000" ("" for P or M: no batches). Worker i of p is single-threaded with a link of
# 150 + 250·((7i mod p) / p) MB/s. Prints, per run, the seconds the report
# gives (`waited`: connect, calibration, plan, first send, wall; the
# measured makespan and the steady-state bound) and the command's own wall
# time, then wall − makespan. Then, for each N (default "1024 2048"; ""
# for none), one product of N² float64 (`--product`, p = 1) on three
# single-threaded workers (links of 300 MB/s, slowdowns 2, 4, 6), cold
# and warm (a platform from `dls calibrate --size 384`). Uses target/release (built first); every
# worker is killed on exit, every command bounded by a timeout. With KEEP
# set to a directory, each p's platform file is kept there (pP.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-32}
ps=${2-4 16 64}
loads=${3-1000 10000 100000}
sides=${4-1024 2048}
cargo build --release -q -p dls-master -p dls-worker
source scripts/local-workers.sh
PIDS=()
dir=$(mktemp -d)
trap 'kill "${PIDS[@]}" 2>/dev/null; rm -rf "$dir"' EXIT

report() { # mode p load json-file command-seconds
  python3 - "$@" <<'EOF'
import json, sys
mode, p, load, path, secs = sys.argv[1:]
d = json.load(open(path))
w = d["waited"]
mk = d["measured_makespan"]
bound = d["bound"]["makespan"] if isinstance(d["bound"], dict) else d["bound"]
print("%-6s %4s %7s %8.3f %8.3f %8.3f %8.3f %9.3f %8.3f %8.3f %8.3f %8.3f" % (
    mode, p, load, w["connect_secs"], w["calibration_secs"], w["plan_secs"], w["first_send_secs"],
    mk, bound, w["wall_secs"], float(secs), float(secs) - mk))
EOF
}

run() { # mode p load args...
  local mode=$1 p=$2 load=$3
  shift 3
  local t0 t1
  t0=$(date +%s.%N)
  timeout 900 target/release/dls run --workers "$WORKERS" --json "$@" \
    >"$dir/out.json" 2>"$dir/err" || { echo "$mode p=$p M=$load failed: $(tail -3 "$dir/err")" >&2; return; }
  t1=$(date +%s.%N)
  report "$mode" "$p" "$load" "$dir/out.json" "$(awk "BEGIN { print $t1 - $t0 }")"
}

printf '%-6s %4s %7s %8s %8s %8s %8s %9s %8s %8s %8s %8s\n' mode p M connect calib plan "1st send" makespan bound wall command "-makespan"
for p in $ps; do
  kill "${PIDS[@]}" 2>/dev/null || true
  PIDS=()
  specs=()
  for ((i = 0; i < p; i++)); do
    specs+=("--threads 1 --memory-limit 256M --link-rate $((150 + 250 * (7 * i % p) / p))")
  done
  start_workers "$dir" "${specs[@]}"
  t0=$(date +%s.%N)
  timeout 900 target/release/dls calibrate --workers "$WORKERS" --size "$size" -o "$dir/p.toml" >/dev/null 2>"$dir/err" ||
    { echo "calibrating $p workers failed: $(tail -3 "$dir/err")" >&2; continue; }
  t1=$(date +%s.%N)
  [[ -n "${KEEP:-}" ]] && cp "$dir/p.toml" "$KEEP/p$p.toml"
  echo "# p = $p: dls calibrate $(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }") s; $(grep -c '^\[uplink\]' "$dir/p.toml" || true) shared uplink found"
  for load in $loads; do
    run cold "$p" "$load" --batch "$load" --size "$size"
    run warm "$p" "$load" --batch "$load" --size "$size" --platform "$dir/p.toml"
    run warm1 "$p" "$load" --batch "$load" --size "$size" --platform "$dir/p.toml" --ports 1
  done
done
[[ -n "$sides" ]] || exit 0
kill "${PIDS[@]}" 2>/dev/null || true
PIDS=()
start_workers "$dir" "--threads 1 --link-rate 300 --slowdown 2" "--threads 1 --link-rate 300 --slowdown 4" \
  "--threads 1 --link-rate 300 --slowdown 6"
timeout 900 target/release/dls calibrate --workers "$WORKERS" --size 384 -o "$dir/p.toml" >/dev/null 2>"$dir/err" ||
  { echo "calibrating for one product failed: $(tail -3 "$dir/err")" >&2; exit 1; }
echo "# one product of N² float64 (M = N) on three workers; goal: wall <= 1.5 x makespan + 0.5 s"
for n in $sides; do
  run cold 1 "$n" --product --size "$n"
  run warm 1 "$n" --product --size "$n" --platform "$dir/p.toml"
done
