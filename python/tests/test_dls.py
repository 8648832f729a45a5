"""The Python package against NumPy: every shape and type, in-process and
separately started workers, errors, and Ctrl-C. Worker processes come from
the repository's build (``target/debug`` or ``target/release``, or the
``DLS_WORKER`` environment variable); each is killed at the end."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import dls

ROOT = Path(__file__).resolve().parents[2]


def worker_binary() -> str:
    if os.environ.get("DLS_WORKER"):
        return os.environ["DLS_WORKER"]
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "dls-worker"
        if p.exists():
            return str(p)
    pytest.skip("no dls-worker binary: build it with `cargo build --bin dls-worker` or set DLS_WORKER")


@pytest.fixture
def token(tmp_path):
    """A token file only its owner may read, as workers and master require."""
    path = tmp_path / "token"
    path.write_text("python-test-token-0123456789")
    path.chmod(0o600)
    return path


class Daemons:
    """`dls-worker` processes on 127.0.0.1, stopped by `stop`."""

    def __init__(self, count, extra=(), token_file=None):
        self.procs, self.addresses = [], []
        for _ in range(count):
            args = [worker_binary(), "--listen", "127.0.0.1:0", "--threads", "1", *extra]
            if token_file:
                args += ["--token-file", str(token_file)]
            p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.procs.append(p)
            line = p.stdout.readline()
            m = re.search(r"listening on (\S+)", line)
            assert m, f"the worker said {line!r}"
            self.addresses.append(m.group(1))

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster():
    with dls.LocalCluster(n=3, emulate=[(None, 1.0), (200.0, 2.0), (None, 1.5)]) as c:
        yield c


def expected(a, b):
    """C in float64, and the rounding any summation order may make in the
    inputs' type: (k + 2)·ε·(|A|·|B|) entry by entry."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    c = np.matmul(a64, b64)
    k = a.shape[-1]
    tol = (k + 2) * np.finfo(a.dtype).eps * np.matmul(np.abs(a64), np.abs(b64))
    return c, tol


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "m,n,k,mm,shared",
    [(30, 8, 8, 8, False), (25, 7, 30, 3, False), (12, 1, 50, 9, False), (20, 16, 4, 11, True), (5, 3, 3, 3, True)],
)
def test_products_match_numpy_for_every_shape_and_type(cluster, dtype, m, n, k, mm, shared):
    rng = np.random.default_rng(m * 1000 + n * 100 + k)
    a = rng.uniform(-1, 1, (m, n, k)).astype(dtype)
    b = rng.uniform(-1, 1, (k, mm) if shared else (m, k, mm)).astype(dtype)
    c = dls.matmul(a, b, workers=cluster.workers)
    assert c.shape == (m, n, mm) and c.dtype == dtype
    want, tol = expected(a, b)
    assert np.all(np.abs(c.astype(np.float64) - want) <= tol)


def test_non_contiguous_and_fortran_inputs_are_taken(cluster):
    rng = np.random.default_rng(5)
    a = np.asfortranarray(rng.uniform(-1, 1, (6, 5, 4)))
    b = rng.uniform(-1, 1, (6, 8, 3))[:, ::2, :]  # a strided view
    c = dls.matmul(a, b, workers=cluster.workers)
    want, tol = expected(a, b)
    assert np.all(np.abs(c - want) <= tol)


def test_a_run_reports_and_writes_its_trace_and_chart(cluster, tmp_path):
    rng = np.random.default_rng(7)
    a, b = rng.uniform(-1, 1, (40, 16, 16)), rng.uniform(-1, 1, (40, 16, 16))
    r = dls.run(a, b, workers=cluster.workers, strategy="rounds", trace=tmp_path / "t.json")
    r.write_gantt(tmp_path / "g.svg")
    assert r.summary["load"] == 40 and r.summary["strategy"] == "rounds"
    assert r.summary["shape"] == [16, 16, 16] and r.summary["dtype"] == "float64"
    assert r.summary["measured_makespan"] > 0 and r.summary["verified"] == 3
    assert (tmp_path / "t.json").read_text().startswith("{")
    assert (tmp_path / "g.svg").read_text().startswith("<svg")
    # A notebook shows the same chart inline.
    assert r._repr_svg_() == (tmp_path / "g.svg").read_text()
    want, tol = expected(a, b)
    assert np.all(np.abs(r.c - want) <= tol)


def test_costs_learned_from_a_batch_plan_the_next(cluster, tmp_path):
    model = tmp_path / "model.json"
    a = np.ones((30, 8, 8))
    dls.run(a, a, workers=cluster.workers, model=model)
    assert json.loads(model.read_text())["batches"] == 1
    done = dls.run(a, a, workers=cluster.workers, model=model)
    assert json.loads(model.read_text())["batches"] == 2
    assert np.array_equal(done.c, np.full((30, 8, 8), 8.0))
    with pytest.raises(dls.InputError, match="name the model file"):
        dls.run(a, a, workers=cluster.workers, learn=True)


def test_a_local_cluster_plans_a_second_batch_with_what_the_first_measured():
    a = np.ones((40, 12, 12))
    with dls.LocalCluster(n=2) as local:
        first = dls.run(a, a, workers=local)
        second = dls.run(a, a, workers=local)
        other = dls.run(np.ones((20, 10, 10)), np.ones((20, 10, 10)), workers=local)
    phases = lambda r: {e.get("args", {}).get("phase") for e in json.loads(r._trace)["traceEvents"]}
    # The first batch calibrates inside the run (probe chunks); the second,
    # of the same products, is planned with what the first measured.
    assert "probe" in phases(first) and "probe" not in phases(second)
    assert any("learned from 1 earlier batch" in n for n in second.summary["notes"])
    assert not any("learned" in n for n in first.summary.get("notes", []))
    # Another kind of product is measured anew.
    assert "probe" in phases(other)
    assert np.array_equal(second.c, np.full((40, 12, 12), 12.0))


def test_a_local_cluster_plans_a_second_product_with_what_the_first_calibrated():
    rng = np.random.default_rng(3)
    a, b = rng.integers(-4, 5, (40, 30)).astype(np.float64), rng.integers(-4, 5, (30, 50)).astype(np.float64)
    with dls.LocalCluster(n=2) as local:
        first = dls.run(a, b, workers=local)
        second = dls.run(a, b, workers=local)
        other = dls.run(a[:, :20], b[:20], workers=local)
    # The first product calibrates its workers; the second, of the same
    # kind, is planned with those costs and measures nothing first.
    assert first.summary["waited"]["calibration_secs"] > 0
    assert second.summary["waited"]["calibration_secs"] == 0
    assert any("calibrated for an earlier product" in n for n in second.summary["notes"])
    assert not any("earlier product" in n for n in first.summary["notes"])
    # Another kind of product is calibrated anew.
    assert other.summary["waited"]["calibration_secs"] > 0
    for done, (x, y) in ((first, (a, b)), (second, (a, b)), (other, (a[:, :20], b[:20]))):
        assert np.array_equal(done.c, x @ y)


def test_progress_is_shown_on_request_only(cluster, capsys):
    a = np.ones((30, 8, 8))
    dls.matmul(a, a, workers=cluster.workers)
    assert "products returned" not in capsys.readouterr().err
    dls.matmul(a, a, workers=cluster.workers, progress=True)
    assert "30/30 products returned" in capsys.readouterr().err


def test_plan_and_calibrate_return_what_the_cli_prints(cluster, tmp_path):
    cal = dls.calibrate((8, 4, 2), workers=cluster.workers, dtype="float32")
    assert [w["name"] for w in cal["workers"]] == cluster.workers
    # Products this small compute in well under the timing noise: a cost
    # per unit may come out at zero or below, and then a warning says so
    # (the planner uses a tiny positive cost instead).
    for w in cal["workers"]:
        for what in ("send", "compute", "return"):
            assert w[what]["slope"] > 0 or any(
                x.startswith(what + ": cost per unit measured") for x in w["warnings"]
            ), (what, w)
    p = tmp_path / "p.toml"
    p.write_text('[[worker]]\nname = "a"\nc = 1\nw = 2\nd = 1\n')
    plan = dls.plan(p, 10, strategy="fifo")
    # One worker, one round: send, compute, return 10 units in a row.
    assert abs(plan["makespan"] - 40.0) < 1e-9
    # By default the fastest family: rounds overlap the three phases, so
    # the makespan falls to the bound, 10 units × max(c, w, d) = 20 s, plus
    # the first send and the last return of their chunks.
    best = dls.plan(p, 10)
    assert best["strategy"] == "best" and 20.0 - 1e-9 <= best["makespan"] < 40.0


def test_plan_paces_sends_only_for_a_clear_gain(tmp_path):
    # Four workers behind a shared full-duplex uplink where paced sends
    # predict an end about 6% earlier than plain ones: less than the 5%
    # (with the planner's 3% slack, 8%) a paced plan must win by on costs
    # measured under load, as dls calibrate writes them. So the plan is
    # the plain one, with or without pacing allowed.
    under = "under_load = [1.0, 1.0, 1.0]\n"
    costs = [("a", 0.0735, 0.0541, 0.0312), ("b", 0.1853, 0.0998, 0.1044),
             ("c", 0.1647, 0.0176, 0.1148), ("d", 0.0962, 0.1661, 0.0508)]
    text = "".join(
        f'[[worker]]\nname = "{n}"\nc = {c}\nw = {w}\nd = {d}\n' + under for n, c, w, d in costs
    ) + "[uplink]\nsend = 0.0380\nret = 0.01931\nduplex = true\n"
    p = tmp_path / "p.toml"
    p.write_text(text)
    default = dls.plan(p, 240)
    plain = dls.plan(p, 240, pace=False)
    assert default["makespan"] == plain["makespan"]
    assert not any(n.startswith("paced:") for n in default["notes"]), default["notes"]
    # The uplink carries at most one unit per 0.0380 s: no plan beats that.
    assert default["bound"] >= 240 * 0.0380 - 1e-9
    assert default["bound"] <= default["makespan"]


def test_workers_started_apart_with_a_token(token):
    d = Daemons(2, token_file=token)
    try:
        a, b = np.ones((8, 4, 3)), np.ones((8, 3, 2))
        c = dls.matmul(a, b, workers=d.addresses, token_file=token)
        assert np.array_equal(c, np.full((8, 4, 2), 3.0))
        # Without the token every worker refuses the master.
        with pytest.raises(dls.ConnectError):
            dls.matmul(a, b, workers=d.addresses)
    finally:
        d.stop()


def test_every_run_option_of_the_cli_works_encrypted(token):
    d = Daemons(2, token_file=token)
    try:
        rng = np.random.default_rng(5)
        a, b = rng.standard_normal((24, 6, 5)), rng.standard_normal((24, 5, 4))
        done = dls.run(
            a,
            b,
            workers=d.addresses,
            token_file=token,
            encrypt=True,
            require_all=True,
            strategy="rounds",
            ports=2,
            rounding="paper",
            straggler=5.0,
            adapt=False,
            chunk_mb=1,
            verify=2,
            seed=1,
        )
        np.testing.assert_allclose(done.c, np.matmul(a, b), rtol=1e-12, atol=1e-12)
        assert done.summary["strategy"] == "rounds"
        c = dls.matmul(a, b, workers=d.addresses, token_file=token, encrypt=True, verify=2, seed=1)
        np.testing.assert_allclose(c, np.matmul(a, b), rtol=1e-12, atol=1e-12)
        # Encryption without a token, and options out of range, are the
        # caller's mistakes.
        for bad in [dict(encrypt=True), dict(ports=3), dict(rounding="nearest"), dict(straggler=0.5)]:
            kw = dict(workers=d.addresses)
            if "encrypt" not in bad:
                kw["token_file"] = token
            with pytest.raises(dls.InputError):
                dls.run(a, b, **kw, **bad)
    finally:
        d.stop()


def test_inputs_are_read_in_place_not_copied_whole():
    """The master copies A and B a chunk at a time as it sends them: its
    peak memory grows by C (which it returns) and a few chunks, not by a
    copy of A and B (800 MB here)."""
    d = Daemons(2)
    try:
        script = textwrap.dedent(
            f"""
            import numpy as np, dls, resource
            a = np.ones((800, 256, 256))
            b = np.ones((800, 256, 256))
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            c = dls.matmul(a, b, workers={d.addresses!r}, strategy="fifo")
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            assert float(c[799, 255, 255]) == 256.0
            print(after - before, a.nbytes + b.nbytes, c.nbytes)
            """
        )
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        grown, inputs, c = map(int, out.stdout.split())
        assert grown < c + inputs / 2, f"peak grew by {grown / 1e6:.0f} MB for {inputs / 1e6:.0f} MB of inputs"
    finally:
        d.stop()


def test_the_package_says_its_version():
    cargo = (ROOT / "Cargo.toml").read_text()
    want = re.search(r'^version = "([^"]+)"', cargo, re.M).group(1)
    assert dls.__version__ == want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,k,m", [(97, 130, 61), (1, 40, 7), (50, 1, 50)])
def test_one_product_of_2d_arrays_matches_numpy(cluster, dtype, n, k, m):
    rng = np.random.default_rng(n * 10000 + k * 100 + m)
    a = rng.uniform(-1, 1, (n, k)).astype(dtype)
    b = rng.uniform(-1, 1, (k, m)).astype(dtype)
    c = dls.matmul(a, b, workers=cluster.workers)
    assert c.shape == (n, m) and c.dtype == dtype
    want, tol = expected(a, b)
    assert np.all(np.abs(c.astype(np.float64) - want) <= tol)


def test_one_product_reports_its_plan_and_writes_its_trace(cluster, tmp_path):
    rng = np.random.default_rng(3)
    a = np.asfortranarray(rng.uniform(-1, 1, (60, 45)))
    b = rng.uniform(-1, 1, (45, 80))
    r = dls.run(a, b, workers=cluster.workers, distribution="homogeneous", trace=tmp_path / "t.json")
    s = r.summary
    assert s["kind"] == "product" and s["distribution"] == "homogeneous"
    assert (s["n"], s["k"], s["m"]) == (60, 45, 80)
    assert s["measured_makespan"] > 0 and s["bound"]["makespan"] > 0
    assert len(s["workers"]) == 3 and "one product" in repr(r)
    assert (tmp_path / "t.json").read_text().startswith("{")
    want, tol = expected(a, b)
    assert np.all(np.abs(r.c - want) <= tol)
    with pytest.raises(dls.InputError, match="B needs 45 rows"):
        dls.matmul(a, np.ones((44, 3)), workers=cluster.workers)
    with pytest.raises(dls.InputError, match="heterogeneous or homogeneous"):
        dls.run(a, b, workers=cluster.workers, distribution="even")


def test_bad_input_raises_the_right_error(cluster):
    a, b = np.ones((4, 3, 5)), np.ones((4, 5, 2))
    with pytest.raises(dls.InputError, match="int64"):
        dls.matmul(np.ones((4, 3, 5), dtype=np.int64), b, workers=cluster.workers)
    with pytest.raises(dls.InputError, match="one type"):
        dls.matmul(a.astype(np.float32), b, workers=cluster.workers)
    with pytest.raises(dls.InputError, match="B needs 5 rows"):
        dls.matmul(a, np.ones((4, 4, 2)), workers=cluster.workers)
    with pytest.raises(dls.InputError, match="pair up"):
        dls.matmul(a, np.ones((3, 5, 2)), workers=cluster.workers)
    with pytest.raises(dls.InputError, match="give the workers"):
        dls.matmul(a, b)
    with pytest.raises(dls.InputError, match="unknown strategy"):
        dls.matmul(a, b, workers=cluster.workers, strategy="fastest")
    with pytest.raises(dls.ConnectError):
        dls.matmul(a, b, workers="127.0.0.1:9")
    assert issubclass(dls.InputError, dls.Error) and issubclass(dls.RunError, dls.Error)
    # Idiomatic except clauses catch them: bad arguments are ValueErrors,
    # unreachable workers ConnectionErrors, whichever layer found them.
    with pytest.raises(ValueError, match="unknown strategy"):
        dls.matmul(a, b, workers=cluster.workers, strategy="fastest")
    with pytest.raises(ValueError, match="int64"):
        dls.matmul(np.ones((4, 3, 5), dtype=np.int64), b, workers=cluster.workers)
    with pytest.raises(ConnectionError):
        dls.matmul(a, b, workers="127.0.0.1:9")
    assert issubclass(dls.ConnectError, dls.Error) and issubclass(dls.RunError, RuntimeError)
    with pytest.raises(dls.InputError, match="slowdown at least 1"):
        dls.LocalCluster(emulate=[(None, 0.5)])
    with pytest.raises(dls.InputError, match="at least one worker"):
        dls.LocalCluster(n=0)
    with pytest.raises(dls.InputError, match="at least 1"):
        dls.calibrate((4, 0, 2), workers=cluster.workers)


def test_ctrl_c_ends_a_batch_and_frees_the_workers(tmp_path):
    # At 200 times the kernel's time a processor with AVX-512 finished the
    # batch within the 2 s before the interrupt: 1,000 leaves it seconds.
    d = Daemons(2, extra=["--slowdown", "1000"])
    try:
        script = textwrap.dedent(
            f"""
            import numpy as np, dls, signal, sys
            # A shell runs background jobs with SIGINT ignored, and children
            # inherit that: restore Python's own handler, as in a terminal.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            a = np.ones((3000, 64, 64))  # several seconds at this slowdown
            print("starting", flush=True)
            dls.matmul(a, a, workers={d.addresses!r}, strategy="fifo")
            print("finished", flush=True)
            """
        )
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "starting"
        time.sleep(2.0)  # calibrated and well into the batch
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=20)
        assert child.returncode != 0 and "KeyboardInterrupt" in err, (child.returncode, out, err)
        assert "finished" not in out
        # The workers took the interrupted master's connection back at once:
        # another master gets them (a busy worker would refuse it).
        t0 = time.monotonic()
        platform = tmp_path / "p.toml"
        platform.write_text("".join(f'[[worker]]\nname = "{a}"\nc = 0.001\nw = 0.01\nd = 0.001\n' for a in d.addresses))
        c = dls.matmul(np.ones((4, 2, 2)), np.ones((4, 2, 2)), workers=d.addresses, platform=platform)
        assert np.array_equal(c, np.full((4, 2, 2), 2.0))
        assert time.monotonic() - t0 < 15
    finally:
        d.stop()


def test_the_readme_example_runs():
    text = (ROOT / "python" / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block, "python/README.md has a python example"
    scope = {}
    exec(compile(block.group(1), "README.md", "exec"), scope)
