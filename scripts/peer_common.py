"""What scripts/peer-dask.py and scripts/peer-dask-array.py share: the
products' shape from the command line, a timed `dls` command, and waiting
for Dask's workers to leave the test bed's nodes."""

import json
import os
import subprocess
import sys
import time

DLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "release", "dls")


def shape_of(args):
    """(n, k, m) from --size or --shape; exits with the problem named."""
    if args.size is not None:
        return args.size, args.size, args.size
    try:
        n, k, m = (int(x) for x in args.shape.split(","))
    except ValueError:
        sys.exit(f"--shape takes three whole numbers n,k,m, not {args.shape!r}")
    return n, k, m


def timed_dls(args):
    """Wall seconds of `dls ARGS` (which must print JSON), and that JSON;
    exits with dls's error when it fails."""
    t0 = time.perf_counter()
    out = subprocess.run([DLS, *args], capture_output=True, text=True, timeout=1800)
    secs = time.perf_counter() - t0
    if out.returncode != 0:
        sys.exit(f"dls {args[0]} failed: {out.stderr[-2000:]}")
    return secs, json.loads(out.stdout)


def wait_for_dask_to_leave(timeout=15.0):
    """Until the Dask workers' processes are gone: they share the nodes'
    CPU quotas, and one still closing slows what dls measures next."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if subprocess.run(["pgrep", "-f", "dask worker"], capture_output=True).returncode != 0:
            return
        time.sleep(0.2)
    print(f"warning: Dask workers still running {timeout:.0f} s after the shutdown", file=sys.stderr)


def testbed():
    """The cluster file and Dask scheduler scripts/testbed.sh gives (with
    DLS_TESTBED_DASK=1), and numpy and Dask's Client; exits naming what is
    missing."""
    cluster = os.environ.get("DLS_TESTBED_CLUSTER")
    scheduler = os.environ.get("DLS_TESTBED_SCHEDULER")
    if not cluster or not scheduler:
        sys.exit("run me inside scripts/testbed.sh with DLS_TESTBED_DASK=1")
    try:
        import numpy
        from distributed import Client
    except ImportError:
        sys.exit("Dask or numpy is missing: pip install distributed numpy")
    return cluster, scheduler, numpy, Client


def with_dask(client_class, scheduler, cluster, work):
    """`work(client)` once every node's Dask worker is up; then Dask is
    shut down and gone, so that dls has the nodes to itself: an idle Dask
    worker's periodic work (heartbeats, monitors) takes a large part of a
    node's small CPU quota, while an idle dls-worker sleeps."""
    with client_class(scheduler) as client:
        client.wait_for_workers(len(open(cluster).read().split("[[worker]]")) - 1, timeout=60)
        out = work(client)
        client.shutdown()
    wait_for_dask_to_leave()
    return out
