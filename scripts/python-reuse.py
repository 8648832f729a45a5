"""What a second ``dls.run`` on the same ``LocalCluster`` costs: each call's
wall time against the makespan inside it, calls in turn with
``workers=cluster`` (the cluster keeps what each batch measured, so the
second call of the same products is planned with it) and with
``workers=cluster.workers`` (every call calibrates inside the run).

    python scripts/python-reuse.py [M] [N] [CALLS] [WORKERS]

Defaults: 2,000 products of 128×128 float64, 3 calls each way, 2 workers.
Needs the package installed (``pip install ./python``). Prints per call
the wall time, the makespan and their difference (what the call costs
beyond the makespan), then the medians of the calls after the first.
"""

import statistics
import sys
import time

import numpy as np

import dls


def call(a: np.ndarray, workers) -> tuple:
    t0 = time.perf_counter()
    r = dls.run(a, a, workers=workers)
    wall = time.perf_counter() - t0
    return wall, r.summary["measured_makespan"], any("learned" in n for n in r.summary.get("notes", []))


def main() -> None:
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    p = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    a = np.random.default_rng(1).uniform(-1, 1, (m, n, n))
    over = {"kept": [], "anew": []}
    walls = {"kept": [], "anew": []}
    with dls.LocalCluster(n=p) as cluster:
        for i in range(calls):
            for way, workers in (("kept", cluster), ("anew", cluster.workers)):
                wall, span, learned = call(a, workers)
                print(
                    f"call {i + 1} {way}: wall {wall:.3f} s, makespan {span:.3f} s, "
                    f"beyond it {wall - span:.3f} s{' (learned costs)' if learned else ''}"
                )
                if i > 0:
                    over[way].append(wall - span)
                    walls[way].append(wall)
    if calls > 1:
        for way, v in over.items():
            print(
                f"calls 2..{calls}, {way}: median wall {statistics.median(walls[way]):.3f} s, "
                f"beyond the makespan {statistics.median(v):.3f} s"
            )


if __name__ == "__main__":
    main()
