"""What `scripts/promises` runs its measurements with: the promise record,
the environment (binaries, scratch directory, worker daemons started and
stopped), the machine's name, the table, and running a script of the tree."""
import os
import platform as _platform
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CannotMeasure(Exception):
    """What a promise needs is not on this machine (said in the table)."""


@dataclass
class Promise:
    name: str
    text: str  # the promise in a line
    where: tuple  # (file, words that state it there)
    bound: str  # the bound, in words
    quick: bool  # in the CI subset
    measure: Callable


class Env:
    """Binaries, a scratch directory, and the worker daemons started."""

    def __init__(self, bins, quick):
        self.bins, self.quick = bins, quick
        self.dir = tempfile.mkdtemp(prefix="dls-promises-")
        self.procs = []

    def bin(self, name):
        return os.path.join(self.bins, name)

    def workers(self, specs):
        """Start one dls-worker per spec (its extra flags) on loopback;
        returns their addresses, comma-separated, once each listens."""
        logs = []
        for spec in specs:
            log = tempfile.NamedTemporaryFile("w+", dir=self.dir, suffix=".log", delete=False)
            p = subprocess.Popen([self.bin("dls-worker"), "--listen", "127.0.0.1:0", *spec.split()],
                                 stdout=log, stderr=subprocess.STDOUT)
            self.procs.append(p)
            logs.append((p, log.name))
        addrs = []
        for p, path in logs:
            for _ in range(200):
                m = re.search(r"listening on (\d+\.\d+\.\d+\.\d+:\d+)", open(path, errors="replace").read())
                if m:
                    addrs.append(m.group(1))
                    break
                if p.poll() is not None:
                    raise RuntimeError("a worker did not start: " + open(path, errors="replace").read()[-300:])
                time.sleep(0.05)
            else:
                raise RuntimeError("a worker did not say where it listens within 10 s")
        return ",".join(addrs)

    def stop_workers(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs = []

    def dls(self, *args, timeout=600, check=True):
        """`dls ARGS`: (stdout, stderr, wall seconds)."""
        t0 = time.time()
        r = subprocess.run([self.bin("dls"), *map(str, args)], capture_output=True, text=True, timeout=timeout)
        wall = time.time() - t0
        if check and r.returncode != 0:
            raise RuntimeError(f"dls {' '.join(map(str, args[:3]))} ... exited {r.returncode}: {r.stderr.strip()[-400:]}")
        return r.stdout, r.stderr, wall

    def path(self, name):
        return os.path.join(self.dir, name)

    def close(self):
        self.stop_workers()
        subprocess.run(["rm", "-rf", self.dir], check=False)


def machine():
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model or _platform.processor()}, {os.cpu_count()} cores"


def table(rows, where_measured):
    head = ["promise", "where", "bound", "measured", "held"]
    lines = [f"measured on {where_measured}, {time.strftime('%Y-%m-%d')}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        held = {True: "yes", False: "**no**", None: "-"}[r["held"]]
        lines.append(f"| {r['name']}: {r['promise']} | {r['where']} | {r['bound']} | {r['measured']} | {held} |")
    return "\n".join(lines)


def script(args, timeout, env=None, cannot=False):
    """Run `args` in the tree; its stdout, or raise naming what it said
    (CannotMeasure when `cannot`: what it needs is missing here)."""
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    if r.returncode != 0:
        raise (CannotMeasure if cannot else RuntimeError)(f"{' '.join(args[:3])}: " + r.stderr.strip()[-300:])
    return r.stdout


def write_platform(env, workers, size):
    """A platform file of `workers` measured now at `size` (dls calibrate)."""
    path = env.path(f"platform-{size}-{abs(hash(workers)) % 10**6}.toml")
    if not os.path.exists(path):
        env.dls("calibrate", "--workers", workers, "--size", size, "-o", path)
    return path
