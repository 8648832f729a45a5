#!/usr/bin/env python3
"""The same batch of products with Dask distributed and with `dls run`.

Run inside the test bed, which starts both kinds of worker on every node
(one-thread Dask workers, dls-worker daemons) and a Dask scheduler; Dask
runs first, then is shut down (scheduler and workers), then dls runs:

    sudo DLS_TESTBED_SWITCH=1000 DLS_TESTBED_DASK=1 DLS_TESTBED_CAP=process \\
      scripts/testbed.sh a:240:10 b:480:20 c:720:30 d:960:40 -- \\
      python3 scripts/peer-dask.py --size 384 --batch 400 --out docs/experiments/peer-dask/balanced-384

`--shape n,k,m` instead of `--size n` gives products of an n×k by a k×m
matrix (the same shape to Dask, `dls calibrate` and `dls run`).

Dask (`pip install distributed numpy`: optional dependencies of this script
only) gets the batch in the client's memory and runs `client.map` over
tasks of 1 and of 8 products with its default settings; its time runs
from the first `map` to the last result gathered into the client. `dls
run` runs on its defaults: warm (with the platform `dls calibrate` wrote,
calibration not counted) and cold (no platform: calibration inside the
run); its time is the whole command's wall time, connecting included.
Each is repeated (--reps, median reported). Writes OUT.json and OUT.md.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

from peer_common import DLS, shape_of, testbed, timed_dls, with_dask


def products(a, b):
    """The products of one task: a list of (A, B) pairs in, C's out."""
    return [x @ y for x, y in zip(a, b)]


def dask_time(client, a, b, per_task):
    """Seconds for Dask to compute every product, results in the client."""
    n = len(a)
    starts = range(0, n, per_task)
    t0 = time.perf_counter()
    futures = client.map(products, [a[s:s + per_task] for s in starts], [b[s:s + per_task] for s in starts], pure=False)
    results = client.gather(futures)
    secs = time.perf_counter() - t0
    got = [c for chunk in results for c in chunk]
    if len(got) != n:
        sys.exit(f"Dask returned {len(got)} products of {n}")
    for i in (0, n // 2, n - 1):
        if abs(got[i] - a[i] @ b[i]).max() > 1e-9 * max(1.0, abs(got[i]).max()):
            sys.exit(f"Dask returned a wrong product {i}")
    return secs


def dls_run(cluster, form, batch, platform, seed):
    """Wall seconds of one `dls run`, and its JSON summary."""
    args = ["run", "--cluster", cluster, *form, "--batch", str(batch), "--seed", str(seed), "--json"]
    if platform:
        args += ["--platform", platform]
    return timed_dls(args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--size", type=int, help="n: products of n x n matrices")
    which.add_argument("--shape", help="n,k,m: products of an n x k by a k x m matrix")
    ap.add_argument("--batch", type=int, required=True, help="products in the batch")
    ap.add_argument("--reps", type=int, default=3, help="runs of each setting (median reported)")
    ap.add_argument("--out", required=True, help="path prefix of OUT.json and OUT.md")
    args = ap.parse_args()
    n, k, m = shape_of(args)
    for what, v in (("n", n), ("k", k), ("m", m), ("--batch", args.batch), ("--reps", args.reps)):
        if v < 1:
            sys.exit(f"{what} must be at least 1, not {v}")
    form = ["--size", str(n)] if args.size else ["--shape", f"{n},{k},{m}"]
    cluster, scheduler, np, Client = testbed()

    rng = np.random.default_rng(1)
    a = [rng.standard_normal((n, k)) for _ in range(args.batch)]
    b = [rng.standard_normal((k, m)) for _ in range(args.batch)]
    rows = with_dask(Client, scheduler, cluster, lambda client: {
        f"dask, tasks of {per_task}": [dask_time(client, a, b, per_task) for _ in range(args.reps)]
        for per_task in (1, 8)
    })
    platform = args.out + ".platform.toml"
    t0 = time.perf_counter()
    cal = subprocess.run([DLS, "calibrate", "--cluster", cluster, *form, "-o", platform],
                         capture_output=True, text=True, timeout=600)
    if cal.returncode != 0:
        sys.exit(f"dls calibrate failed: {cal.stderr[-2000:]}")
    calibrate = time.perf_counter() - t0
    ports = next((l for l in cal.stdout.splitlines() + cal.stderr.splitlines() if "ports:" in l), "")
    warm, cold, ratios = [], [], []
    for r in range(args.reps):
        secs, summary = dls_run(cluster, form, args.batch, platform, r + 1)
        warm.append(secs)
        ratios.append(summary["ratio"])
        cold.append(dls_run(cluster, form, args.batch, None, r + 1)[0])
    rows["dls run, warm (platform from dls calibrate)"] = warm
    rows["dls run, cold (no platform)"] = cold
    best_dask = min(statistics.median(v) for k, v in rows.items() if k.startswith("dask"))
    result = {
        "size": args.size,
        "shape": [n, k, m],
        "batch": args.batch,
        "cluster": open(cluster).read(),
        "calibrate_seconds": calibrate,
        "ports": ports.strip(),
        "measured_over_predicted": ratios,
        "seconds": rows,
        "best_dask_median": best_dask,
    }
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(args.out + ".md", "w") as f:
        what = f"{n}x{n}" if args.size else f"a {n}x{k} by a {k}x{m}"
        f.write(f"Batch of {args.batch} products of {what} (float64), {args.reps} runs each.\n\n")
        f.write("| setting | median s | runs (s) | / best Dask |\n| --- | --- | --- | --- |\n")
        for k, v in rows.items():
            med = statistics.median(v)
            f.write(f"| {k} | {med:.2f} | {', '.join(f'{x:.2f}' for x in v)} | {med / best_dask:.2f} |\n")
        f.write(f"\n`dls calibrate`: {calibrate:.1f} s; {ports.strip()}\n")
        f.write(f"dls measured/predicted (warm): {', '.join(f'{x:.3f}' for x in ratios)}\n")
    print(open(args.out + ".md").read())


if __name__ == "__main__":
    main()
