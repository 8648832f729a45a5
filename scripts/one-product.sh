#!/usr/bin/env bash
# One large product on a heterogeneous emulated star: A and B (N×N
# float64) written as .npy files, four dls-worker daemons on loopback
# (links of 320 MB/s, slowdowns 3, 4, 6 and 12: speeds 4:3:2:1), one
# `dls calibrate`, then `dls run --input A B --output C` with the
# heterogeneous and the homogeneous distribution, each under
# /usr/bin/time. Prints, per distribution, the measured and predicted
# makespan, the bound, the partition's communication over its lower bound
# and the master's peak memory over A + B + C; then the ratio of the two
# makespans.
#
#   scripts/one-product.sh [DIR] [N] [LINK] [SLOWDOWNS] [THREADS]
#
# Defaults: DIR a fresh temporary directory (removed at the end), N = 4096
# (A, B and C of 134 MB each), LINK = 320 (MB/s, every worker's link),
# SLOWDOWNS = "3 4 6 12" (one worker each), THREADS each worker's
# compute threads (default: every core). Uses target/release (built if missing).
# COLD=1: no `dls calibrate` and no platform file: each run calibrates
# inside itself, as `dls run` without --platform does (the first run is
# then also the daemons' first work, as a new user's is).
# Stops by itself: each run is bounded by `timeout`, the workers are
# killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-}
N=${2:-4096}
LINK=${3:-320}
SLOWDOWNS=${4:-3 4 6 12}
THREADS=${5:-}
CLEAN=0
if [[ -z "$DIR" ]]; then
  DIR=$(mktemp -d)
  CLEAN=1
fi
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive whole number (got $N)" >&2; exit 1; }
[[ "$LINK" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "LINK must be a rate in MB/s (got $LINK)" >&2; exit 1; }
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ $CLEAN == 1 ]]; then rm -rf "$DIR"; fi
}
trap cleanup EXIT
mkdir -p "$DIR"
[[ -x target/release/dls && -x target/release/dls-worker ]] || cargo build --release --bin dls --bin dls-worker
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (Debian package: time)" >&2; exit 1; }

python3 - "$DIR" "$N" <<'EOF'
import array, random, sys
d, n = sys.argv[1], int(sys.argv[2])
for name, seed in (("A", 1), ("B", 2)):
    r = random.Random(seed).random
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (n, n)
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    with open(f"{d}/{name}.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        for start in range(0, n * n, 1 << 20):
            f.write(array.array("d", [2 * r() - 1 for _ in range(min(1 << 20, n * n - start))]).tobytes())
EOF

# shellcheck source=scripts/local-workers.sh
source scripts/local-workers.sh
specs=()
for s in $SLOWDOWNS; do specs+=("--link-rate $LINK --slowdown $s${THREADS:+ --threads $THREADS}"); done
start_workers "$DIR" "${specs[@]}"
PLATFORM=()
if [[ -z "${COLD:-}" ]]; then
  timeout 300 target/release/dls calibrate --workers "$WORKERS" --size 384 -o "$DIR/platform.toml" >/dev/null 2>&1
  PLATFORM=(--platform "$DIR/platform.toml")
fi
DATA=$((3 * N * N * 8))
for d in heterogeneous homogeneous; do
  timeout 900 /usr/bin/time -f "%M" -o "$DIR/$d.rss" target/release/dls run --workers "$WORKERS" \
    --input "$DIR/A.npy" "$DIR/B.npy" --output "$DIR/C.npy" "${PLATFORM[@]}" \
    --distribution "$d" --json >"$DIR/$d.json" 2>"$DIR/$d.err" || { cat "$DIR/$d.err" >&2; exit 1; }
  python3 - "$DIR/$d.json" "$(cat "$DIR/$d.rss")" "$DATA" "$d" <<'EOF'
import json, sys
r, rss_kb, data, d = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
print(f"{d:13} measured {r['measured_makespan']:.3f} s  predicted {r['predicted_makespan']:.3f} s "
      f"({r['measured_over_predicted']:.3f}x)  bound {r['bound']['makespan']:.3f} s "
      f"({r['measured_over_bound']:.3f}x)  communication {r['communication']['partition_over_lower']:.3f}x its lower bound  "
      f"master peak {rss_kb / 1024:.1f} MiB = {100 * rss_kb * 1024 / data:.1f}% of A+B+C  "
      f"workers {len(r['workers'])}")
EOF
done
python3 - "$DIR/heterogeneous.json" "$DIR/homogeneous.json" <<'EOF'
import json, sys
het, hom = (json.load(open(p))["measured_makespan"] for p in sys.argv[1:3])
print(f"heterogeneous / homogeneous makespan: {het / hom:.3f}")
EOF
