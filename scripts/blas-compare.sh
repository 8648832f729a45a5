#!/usr/bin/env bash
# The worker's kernel (faer, `dls-worker bench`) against OpenBLAS (the one in
# numpy's wheel) on this machine, in one run, interleaved size by size:
#
#   scripts/blas-compare.sh [SIZES...]     (default: 64 128 256 512 1024)
#
# Both sides compute a batch of k products of n×n float64 matrices, k =
# 4 Mi / n³ clamped to 1..64, into a fresh result, best of three timings of
# about 0.2 s each; with 1 and with 2 threads. numpy is installed into
# target/blas-venv (PyPI) on first use. Prints a table; nothing is written.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/blas-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c 'import numpy' 2>/dev/null || "$venv/bin/pip" install -q 'numpy>=2,<3'
cargo build --release -q -p dls-worker

openblas() { # n threads -> GFLOP/s
  OPENBLAS_NUM_THREADS=$2 "$venv/bin/python" - "$1" <<'EOF'
import sys, time
import numpy as np
n = int(sys.argv[1])
k = min(64, max(1, 4 * 1024 * 1024 // n ** 3))
rng = np.random.default_rng(n)
a = rng.standard_normal((k, n, n))
b = rng.standard_normal((k, n, n))
def run(reps):
    t = time.perf_counter()
    for _ in range(reps):
        np.matmul(a, b)
    return time.perf_counter() - t
once = max(run(1), 1e-6)
reps = min(100000, max(1, int(0.2 / once + 0.999)))
best = min(run(reps) for _ in range(3))
print(2.0 * n ** 3 * k * reps / best / 1e9)
EOF
}

ours() { # n threads -> GFLOP/s
  target/release/dls-worker bench --size "$1" --threads "$2" --json | sed -n 's/.*"gflops":\([0-9.eE+-]*\).*/\1/p'
}

echo "numpy $("$venv/bin/python" -c 'import numpy; print(numpy.__version__)') (OpenBLAS), $(target/release/dls-worker bench --size 8 --json | sed -n 's/.*"kernel":"\([^"]*\)".*/\1/p')"
printf '%6s %8s %12s %12s %8s\n' n threads "dls GFLOP/s" "OpenBLAS" "dls/OB"
for t in 1 2; do
  for n in ${*:-64 128 256 512 1024}; do
    o=$(ours "$n" "$t")
    b=$(openblas "$n" "$t")
    awk -v n="$n" -v t="$t" -v o="$o" -v b="$b" 'BEGIN { printf "%6d %8d %12.1f %12.1f %8.2f\n", n, t, o, b, o / b }'
  done
done
