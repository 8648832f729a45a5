#!/usr/bin/env python3
"""One large product with dask.array and with `dls run`, on the same nodes.

Run inside the test bed, which starts both kinds of worker on every node
(one-thread Dask workers, dls-worker daemons) and a Dask scheduler; Dask
runs first, then is shut down, then dls runs. The switch bed of issue
"One large product faster than dask.array" (links in megabits):

    sudo DLS_TESTBED_SWITCH=960 DLS_TESTBED_DASK=1 DLS_TESTBED_CAP=process \\
      PATH="$PWD/target/dask-venv/bin:$PATH" \\
      scripts/testbed.sh a:960:40 b:480:30 c:960:20 d:240:60 -- \\
      python3 scripts/peer-dask-array.py --size 3072 --out docs/experiments/peer-dask-array/switch-3072

A and B (float64, standard normal, seeded) are made once, kept in the
client's memory for Dask and written as .npy files for dls. Dask computes
`(da.from_array(A, chunks=c) @ da.from_array(B, chunks=c)).compute()` for
c = ⌈n/q⌉ with q in --splits (default 2, 3, 4): its time runs from the
call to C in the client's memory. `dls run --input A.npy B.npy --output
C.npy` runs cold (no platform: calibration inside the run), with the
heterogeneous distribution (dls's default) and the homogeneous prototype;
its time is the whole command's wall time, connecting and writing C
included. Every C is checked on a few rows against numpy. Each setting
is repeated (--reps, median reported). Writes OUT.json and OUT.md.
(`pip install distributed numpy`: optional dependencies of this script.)
"""

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time

from peer_common import shape_of, testbed, timed_dls, with_dask


def check(c, a, b, what):
    """C against numpy on three rows; exits naming the setting if wrong."""
    for i in (0, a.shape[0] // 2, a.shape[0] - 1):
        want = a[i] @ b
        if abs(c[i] - want).max() > 1e-9 * max(1.0, abs(want).max()) * a.shape[1]:
            sys.exit(f"{what} returned a wrong row {i} of C")


def dask_time(a, b, split):
    """Seconds for dask.array to compute A·B in chunks of about n/split."""
    import dask.array as da
    n, k = a.shape
    m = b.shape[1]
    ca = (math.ceil(n / split), math.ceil(k / split))
    cb = (math.ceil(k / split), math.ceil(m / split))
    t0 = time.perf_counter()
    c = (da.from_array(a, chunks=ca) @ da.from_array(b, chunks=cb)).compute()
    secs = time.perf_counter() - t0
    check(c, a, b, f"dask.array, chunks of n/{split}")
    return secs


def dls_run(cluster, files, out, distribution):
    """Wall seconds of one cold `dls run` of the product, and its summary."""
    return timed_dls(["run", "--cluster", cluster, "--input", *files, "--output", out,
                      "--distribution", distribution, "--json"])


def table(rows, dls, best_dask):
    """OUT.md's table: every setting against Dask's best, and what dls
    reported of its runs."""
    out = ["| setting | median s | runs (s) | / best Dask |", "| --- | --- | --- | --- |"]
    for name, v in rows.items():
        med = statistics.median(v)
        out.append(f"| {name} | {med:.2f} | {', '.join(f'{x:.2f}' for x in v)} | {med / best_dask:.2f} |")
    out += ["", "| dls, cold | makespan s | predicted s | bound s | measured / bound | measured / predicted |",
            "| --- | --- | --- | --- | --- | --- |"]
    for name, runs in dls.items():
        for s in runs:
            out.append(f"| {name} | {s['measured_makespan']:.2f} | {s['predicted_makespan']:.2f} | "
                       f"{s['bound']['makespan']:.2f} | {s['measured_over_bound']:.2f} | "
                       f"{s['measured_over_predicted']:.2f} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--size", type=int, help="n: A, B and C n x n")
    which.add_argument("--shape", help="n,k,m: an n x k A by a k x m B")
    ap.add_argument("--splits", default="2,3,4", help="Dask's chunkings: chunks of about n/q for each q")
    ap.add_argument("--reps", type=int, default=3, help="runs of each setting (median reported)")
    ap.add_argument("--out", required=True, help="path prefix of OUT.json and OUT.md")
    args = ap.parse_args()
    n, k, m = shape_of(args)
    try:
        splits = [int(q) for q in args.splits.split(",")]
    except ValueError:
        sys.exit(f"--splits takes whole numbers separated by commas, not {args.splits!r}")
    for what, v in (("n", n), ("k", k), ("m", m), ("--reps", args.reps), *(("a split", q) for q in splits)):
        if v < 1:
            sys.exit(f"{what} must be at least 1, not {v}")
    cluster, scheduler, np, Client = testbed()

    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, k))
    b = rng.standard_normal((k, m))
    rows = with_dask(Client, scheduler, cluster, lambda client: {
        f"dask.array, chunks of n/{q}": [dask_time(a, b, q) for _ in range(args.reps)] for q in splits
    })
    dls = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = [os.path.join(tmp, "A.npy"), os.path.join(tmp, "B.npy")]
        np.save(files[0], a)
        np.save(files[1], b)
        out = os.path.join(tmp, "C.npy")
        for dist in ("heterogeneous", "homogeneous"):
            secs, runs = [], []
            for _ in range(args.reps):
                s, summary = dls_run(cluster, files, out, dist)
                check(np.load(out, mmap_mode="r"), a, b, f"dls run, {dist}")
                secs.append(s)
                runs.append(summary)
            rows[f"dls run, cold, {dist}"] = secs
            dls[dist] = runs
    best_dask = min(statistics.median(v) for name, v in rows.items() if name.startswith("dask"))
    result = {
        "shape": [n, k, m],
        "cluster": open(cluster).read(),
        "seconds": rows,
        "best_dask_median": best_dask,
        "dls": {d: [{key: s[key] for key in ("measured_makespan", "predicted_makespan", "bound", "waited",
                                             "communication")} for s in runs] for d, runs in dls.items()},
    }
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write(f"One product of a {n}x{k} by a {k}x{m} float64 matrix, {args.reps} runs each.\n\n")
        f.write(table(rows, dls, best_dask))
    print(open(args.out + ".md").read())


if __name__ == "__main__":
    main()
