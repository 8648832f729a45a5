"""The Python path against the command line on the same batch and workers:
``dls.matmul(A, B)`` against writing A and B as .npy, running ``dls run
--input A B --output C`` and reading C back. Both plan from the same
platform file (no calibration in either), interleaved, medians.

    python scripts/python-overhead.py [M] [N] [REPS]

Defaults: 200 products of 256×256 float64, 5 repetitions. Needs the
package installed (``pip install ./python``) and ``target/release/dls`` and
``dls-worker`` (``cargo build --release``); two workers on loopback,
killed at the end.
"""

import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import dls

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / "target" / "release"


def main() -> None:
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    procs, addrs = [], []
    for _ in range(2):
        p = subprocess.Popen(
            [str(BIN / "dls-worker"), "--listen", "127.0.0.1:0", "--threads", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        procs.append(p)
        addrs.append(re.search(r"listening on (\S+)", p.stdout.readline()).group(1))
    workers = ",".join(addrs)
    try:
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            platform = d / "p.toml"
            subprocess.run(
                [str(BIN / "dls"), "calibrate", "--workers", workers, "--size", str(n), "-o", str(platform)],
                check=True,
                capture_output=True,
            )
            rng = np.random.default_rng(1)
            a, b = rng.uniform(-1, 1, (m, n, n)), rng.uniform(-1, 1, (m, n, n))

            def python_path() -> float:
                t = time.perf_counter()
                c = dls.matmul(a, b, workers=workers, platform=platform, strategy="fifo")
                elapsed = time.perf_counter() - t
                assert c.shape == (m, n, n)
                return elapsed

            def cli_path() -> float:
                t = time.perf_counter()
                np.save(d / "a.npy", a)
                np.save(d / "b.npy", b)
                subprocess.run(
                    [str(BIN / "dls"), "run", "--workers", workers, "--platform", str(platform),
                     "--strategy", "fifo", "--input", str(d / "a.npy"), str(d / "b.npy"),
                     "--output", str(d / "c.npy")],
                    check=True,
                    capture_output=True,
                )
                c = np.load(d / "c.npy")
                elapsed = time.perf_counter() - t
                assert c.shape == (m, n, n)
                return elapsed

            python_path(), cli_path()  # warm up both
            py, cli = [], []
            for r in range(reps):
                order = (python_path, cli_path) if r % 2 == 0 else (cli_path, python_path)
                for f in order:
                    (py if f is python_path else cli).append(f())
            mp, mc = statistics.median(py), statistics.median(cli)
            print(f"{m} products of {n}x{n} float64, 2 workers on loopback, {reps} runs each, medians:")
            print(f"  dls.matmul                            {mp:.3f} s")
            print(f"  np.save + dls run + np.load            {mc:.3f} s")
            print(f"  python / cli                           {mp / mc:.3f}")
    finally:
        for p in procs:
            p.kill()


if __name__ == "__main__":
    main()
