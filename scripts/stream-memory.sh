#!/usr/bin/env bash
# The master's peak memory on a batch larger than it should hold: A and B
# written as .npy files, two dls-worker daemons on loopback, `dls run
# --input A B --output C` under /usr/bin/time -v; prints the data size, the
# master's maximum resident set size and their ratio, and checks C's size.
#
#   scripts/stream-memory.sh [DIR] [M] [N] [DTYPE]
#
# Defaults: DIR a fresh temporary directory (removed at the end), M = 340
# products of N = 512, float64: A, B and C of 713 MB each, 2.14 GB in all.
# Uses target/release (built if missing). Stops by itself: the run is
# bounded by `timeout`, the workers are killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-}
M=${2:-340}
N=${3:-512}
DTYPE=${4:-float64}
CLEAN=0
if [[ -z "$DIR" ]]; then
  DIR=$(mktemp -d)
  CLEAN=1
fi
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ $CLEAN == 1 ]]; then rm -rf "$DIR"; fi
}
trap cleanup EXIT
mkdir -p "$DIR"
[[ -x target/release/dls && -x target/release/dls-worker ]] || cargo build --release --bin dls --bin dls-worker
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (Debian package: time)" >&2; exit 1; }

# A (M, N, N) and B (M, N, N): one random product repeated (the values do
# not matter to memory; every product is still checked by the master).
python3 - "$DIR" "$M" "$N" "$DTYPE" <<'EOF'
import random, struct, sys
d, m, n, dtype = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
code, descr = ("f", "<f4") if dtype == "float32" else ("d", "<f8")
rnd = random.Random(1)
for name in ("a", "b"):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d, %d), }" % (descr, m, n, n)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    block = struct.pack("<%d%s" % (n * n, code), *(rnd.uniform(-1, 1) for _ in range(n * n)))
    with open("%s/%s.npy" % (d, name), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        for _ in range(m):
            f.write(block)
EOF

source scripts/local-workers.sh
start_workers "$DIR" "--threads 1" "--threads 1"
timeout 1200 /usr/bin/time -v target/release/dls run --workers "$WORKERS" \
  --input "$DIR/a.npy" "$DIR/b.npy" --output "$DIR/c.npy" --verify 3 --json \
  >"$DIR/run.json" 2>"$DIR/run.err" || { cat "$DIR/run.err" >&2; exit 1; }

data=$(( $(stat -c %s "$DIR/a.npy") + $(stat -c %s "$DIR/b.npy") + $(stat -c %s "$DIR/c.npy") ))
rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$DIR/run.err")
python3 - "$data" "$rss_kb" "$M" "$N" "$DTYPE" "$DIR/run.json" <<'EOF'
import json, sys
data, rss = int(sys.argv[1]), int(sys.argv[2]) * 1024
m, n, dtype = sys.argv[3], sys.argv[4], sys.argv[5]
run = json.load(open(sys.argv[6]))
print(f"{m} products of {n}x{n} {dtype}: data (A, B, C files) {data / 1e9:.2f} GB")
print(f"master peak RSS {rss / 1e6:.0f} MB = {100 * rss / data:.1f}% of the data")
ports = "a shared uplink" if run.get("uplink") else ("one port" if run["ports"] == 1 else "two ports")
print(f"makespan {run['measured_makespan']:.1f} s, verified {run['verified']}, lost {len(run.get('failures', []))}, port model: {ports}")
EOF
