"""Batches of NumPy matrix products, or one large product, on a star of
unequal machines.

``dls`` sends each worker its share of the products, collects the results
in the order its plan says, checks every one, and hands back ``C`` with
``C[i] = A[i] @ B[i]``; given two 2-D arrays it computes the one product
``A @ B``, cut in rectangles over the workers, as ``numpy.matmul`` does. The workers are ``dls-worker`` daemons (started on
the cluster's nodes, or in this process with :class:`LocalCluster`).

>>> import numpy as np, dls
>>> with dls.LocalCluster(n=2) as cluster:
...     c = dls.matmul(np.ones((4, 3, 5)), np.ones((4, 5, 2)), workers=cluster.workers)
>>> c.shape, float(c[0, 0, 0])
((4, 3, 2), 5.0)
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Literal, Optional, Sequence, Tuple, TypedDict, TypeVar, Union

import numpy as np

from . import _native

__version__: str = _native.__version__

__all__ = [
    "__version__",
    "matmul",
    "run",
    "plan",
    "calibrate",
    "Run",
    "LocalCluster",
    "Error",
    "InputError",
    "ConnectError",
    "RunError",
    "Strategy",
    "Summary",
    "WorkerSummary",
    "PlanSummary",
]


class Error(Exception):
    """Anything dls refuses or fails at."""


class InputError(Error, ValueError):
    """The arrays, shapes, types or arguments are not what dls takes."""


class ConnectError(Error, ConnectionError):
    """No worker could be reached, or none calibrated."""


class RunError(Error, RuntimeError):
    """The batch did not complete."""


_NATIVE_ERRORS = (
    (_native.InputError, InputError),
    (_native.ConnectError, ConnectError),
    (_native.RunError, RunError),
    (_native.Error, Error),
)

_F = TypeVar("_F", bound=Callable[..., Any])


def _translated(f: _F) -> _F:
    """Raise the extension's errors as this module's classes (which also
    derive from the matching built-ins), with the same message."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except _native.Error as e:
            for native, ours in _NATIVE_ERRORS:
                if isinstance(e, native):
                    raise ours(str(e)) from None
            raise  # pragma: no cover - every native error is an _native.Error

    return wrapper  # type: ignore[return-value]


Strategy = Literal["fifo", "lifo", "inc-c", "inc-w", "best", "rounds"]


class Times(TypedDict):
    send_start: float
    send_end: float
    compute_end: float
    return_start: float
    return_end: float
    idle: float


class WorkerSummary(TypedDict):
    name: str
    load: int
    predicted: Times
    measured: Times
    compute_secs: float
    send_secs: float
    return_secs: float


class Summary(TypedDict, total=False):
    """What ``dls run --json`` prints (``Run.summary``); the optional
    lists are present when something happened."""

    strategy: Strategy
    ports: int
    load: int
    size: int
    shape: List[int]
    dtype: str
    shared_b: bool
    optimal: bool
    send_order: List[str]
    return_order: List[str]
    predicted_makespan: float
    measured_makespan: float
    ratio: float
    bound: float
    measured_over_bound: float
    homogeneous_makespan: float
    efficiency: float
    measured_efficiency: float
    verified: int
    max_abs_error: float
    workers: List[WorkerSummary]
    master_peak_rss_bytes: Optional[int]
    left_out: List[Dict[str, Any]]
    failures: List[Dict[str, Any]]
    replans: List[Dict[str, Any]]
    adaptations: List[Dict[str, Any]]
    notes: List[str]


class PlanWorker(TypedDict):
    name: str
    alpha: float
    load: int


class PlanSummary(TypedDict, total=False):
    """What ``dls plan --json`` prints (per worker, its share and times)."""

    strategy: Strategy
    ports: int
    load: int
    optimal: bool
    makespan: float
    makespan_rational: float
    throughput: float
    bound: float
    makespan_over_bound: float
    send_order: List[str]
    return_order: List[str]
    homogeneous_makespan: float
    efficiency: float
    workers: List[Dict[str, Any]]
    notes: List[str]

Workers = Union[str, Sequence[str], "LocalCluster", None]
PathLike = Union[str, "os.PathLike[str]", None]


def _workers(workers: Workers) -> Optional[str]:
    if isinstance(workers, LocalCluster):
        workers = workers.workers
    if workers is None or isinstance(workers, str):
        return workers
    return ",".join(workers)


def _path(p: PathLike) -> Optional[str]:
    return None if p is None else os.fspath(p)


def _arrays(a: Any, b: Any) -> Tuple[np.ndarray, np.ndarray]:
    """A and B as C-contiguous arrays of one floating type (copied only
    when their layout or type asks for it)."""
    a, b = np.asarray(a), np.asarray(b)
    for name, x in (("A", a), ("B", b)):
        if x.dtype not in (np.float32, np.float64):
            raise InputError(f"{name} holds {x.dtype} values; dls multiplies float32 or float64")
    if a.dtype != b.dtype:
        raise InputError(f"A holds {a.dtype} values but B holds {b.dtype}: both must have one type")
    return np.ascontiguousarray(a), np.ascontiguousarray(b)


class Run:
    """A finished batch: ``c`` (shape (M, n, m), the inputs' type), its
    ``summary`` (what ``dls run --json`` prints, as a dict), and its trace
    and Gantt chart, written on request."""

    def __init__(self, native: Any) -> None:
        self.c: np.ndarray = native.c
        self.summary: Summary = json.loads(native.summary)
        self._trace: str = native.trace
        self._gantt: str = native.gantt

    def write_trace(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write the Chrome trace-event JSON (open it in Perfetto)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self._trace)

    def write_gantt(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write the SVG Gantt chart, measured above predicted."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self._gantt)

    def _repr_svg_(self) -> str:
        """The Gantt chart, shown inline in a notebook."""
        return self._gantt

    def __repr__(self) -> str:
        s: Dict[str, Any] = dict(self.summary)
        if s.get("kind") == "product":
            return (
                f"<dls.Run one product {s['n']}x{s['k']} @ {s['k']}x{s['m']} {s['dtype']}, "
                f"{s['distribution']}: predicted {s['predicted_makespan']:.3f} s, "
                f"measured {s['measured_makespan']:.3f} s>"
            )
        return (
            f"<dls.Run {s['load']} products of {s['shape']} {s['dtype']}, {s['strategy']}: "
            f"predicted {s['predicted_makespan']:.3f} s, measured {s['measured_makespan']:.3f} s>"
        )


@_translated
def run(
    a: Any,
    b: Any,
    *,
    workers: Workers = None,
    cluster: PathLike = None,
    slurm: bool = False,
    worker_port: int = 7070,
    token_file: PathLike = None,
    strategy: Strategy = "best",
    platform: PathLike = None,
    verify: int = 3,
    seed: int = 0,
    trace: PathLike = None,
    gantt: PathLike = None,
    progress: bool = False,
    encrypt: bool = False,
    require_all: bool = False,
    ports: Optional[int] = None,
    rounding: str = "refined",
    straggler: Optional[float] = None,
    adapt: bool = True,
    chunk_mb: int = 64,
    learn: bool = False,
    model: PathLike = None,
    distribution: Literal["heterogeneous", "homogeneous"] = "heterogeneous",
) -> Run:
    """Run the batch C[i] = A[i] @ B[i] on the workers and return a :class:`Run`.

    Given two 2-D arrays, A (n, k) and B (k, m), it runs the one product
    C = A @ B instead: C cut into one rectangle per worker, areas following
    the workers' speeds (``distribution="homogeneous"``: equal ones), A
    and B sent in panels and every piece of C checked; ``summary`` is then
    what ``dls run`` prints for one product. The batch options
    (``strategy``, ``verify``, ``rounding``, ``straggler``, ``adapt``,
    ``chunk_mb``, ``learn``, ``model``, ``seed``) do not apply to it.

    ``a`` has shape (M, n, k); ``b`` has shape (M, k, m), or (k, m) for one
    B shared by every product (sent once to each worker). Both float32 or
    both float64; C has their type. The workers are given by ``workers``
    ("host:port,..." or a list of them), ``cluster`` (a cluster file) or
    ``slurm=True`` (this Slurm job's nodes at ``worker_port``). They are
    calibrated for these products unless ``platform`` (a platform file)
    gives their costs. ``strategy``: fifo, lifo, inc-c, inc-w, rounds or
    best. ``verify`` products are recomputed by the master (every product is
    checked with Freivalds' test anyway). The GIL is released while the
    batch runs (do not write into ``a`` or ``b`` meanwhile: they are read
    in place); Ctrl-C stops it and frees the workers. Errors raise
    :class:`InputError`, :class:`ConnectError` or :class:`RunError`, all
    :class:`Error`. ``progress=True`` shows how many products are back on
    ``sys.stderr`` (a terminal or a notebook).

    The other options are those of ``dls run``: ``encrypt`` (every frame
    sealed; needs a token), ``require_all`` (fail unless every worker
    answers and can be measured, instead of leaving it out), ``ports`` (None:
    the model measured, the uplink the platform file records or else one
    port; 1, the one-port model; or 2), ``rounding`` ("refined" or "paper"),
    ``straggler`` (give up on a worker this many times later than
    predicted), ``adapt`` (online correction of multi-round plans),
    ``chunk_mb`` (the largest message, in MiB), ``learn`` and ``model``
    (plan with the costs learned from earlier batches of these products,
    kept in ``model`` or beside the cluster file, and learn from this one).

    ``workers`` may be a :class:`LocalCluster`: it then keeps what each
    batch measured, one model per kind of product, and a later batch of
    the same products on it is planned with those costs instead of being
    calibrated again (unless ``platform``, ``model`` or ``learn`` is
    given); ``summary["notes"]`` says so.
    """
    a, b = _arrays(a, b)
    if a.ndim == 2 and b.ndim == 2:
        # A LocalCluster keeps the costs its first product of this kind
        # calibrated, and plans the next ones with them.
        kept: Optional[str] = None
        known = False
        if isinstance(workers, LocalCluster) and platform is None:
            kept, known = workers._platform_for(a, b)
        native = _native.product(
            a,
            b,
            workers=_workers(workers),
            cluster=_path(cluster),
            slurm=slurm,
            worker_port=worker_port,
            token_file=_path(token_file),
            platform=kept if known else _path(platform),
            distribution=distribution,
            ports=ports,
            progress=progress,
            encrypt=encrypt,
            require_all=require_all,
            keep_platform=None if known else kept,
        )
        done = _finished(native, trace, gantt)
        if known:
            done.summary.setdefault("notes", []).append(
                "planned with the costs this LocalCluster calibrated for an earlier product of this kind"
            )
        return done
    # A LocalCluster keeps what its batches of these products taught.
    kept: Optional[str] = None
    learned = 0
    if isinstance(workers, LocalCluster) and platform is None and model is None and not learn:
        kept, learned = workers._model_for(a, b)
    native = _native.run(
        a,
        b,
        workers=_workers(workers),
        cluster=_path(cluster),
        slurm=slurm,
        worker_port=worker_port,
        token_file=_path(token_file),
        strategy=strategy,
        platform=_path(platform),
        verify=verify,
        seed=seed,
        progress=progress,
        encrypt=encrypt,
        require_all=require_all,
        ports=ports,
        rounding=rounding,
        straggler=straggler,
        adapt=adapt,
        chunk_mb=chunk_mb,
        learn=learn,
        model=_path(model) if kept is None else kept,
    )
    done = _finished(native, trace, gantt)
    if learned:
        done.summary.setdefault("notes", []).append(
            f"planned with the costs this LocalCluster learned from {learned} earlier batch(es) of these products"
        )
    return done


def _finished(native: Any, trace: PathLike, gantt: PathLike) -> Run:
    """The :class:`Run` of a finished native run, its trace and chart
    written where asked."""
    done = Run(native)
    if trace is not None:
        done.write_trace(trace)
    if gantt is not None:
        done.write_gantt(gantt)
    return done


def matmul(a: Any, b: Any, **options: Any) -> np.ndarray:
    """``numpy.matmul`` on the workers: the batch of products A[i] @ B[i]
    (C in batch order; B may be one (k, m) matrix for all), or, for two
    2-D arrays, the one product A @ B. What :func:`run` returns as ``c``,
    with the same keyword arguments (every option of ``dls run``)."""
    return run(a, b, **options).c


@_translated
def plan(
    platform: Union[str, "os.PathLike[str]"],
    load: int,
    strategy: Strategy = "best",
    ports: Optional[int] = None,
    pace: bool = True,
) -> PlanSummary:
    """The plan for ``load`` products on the workers of a platform file:
    what ``dls plan --json`` prints, as a dict. Behind a shared uplink,
    sends are paced where that ends the plan earlier, as in a run;
    ``pace=False`` forbids it (``dls plan --no-pace``)."""
    return json.loads(_native.plan(os.fspath(platform), load, strategy, ports, pace))


@_translated
def calibrate(
    shape: Union[int, Tuple[int, int, int]],
    *,
    workers: Workers = None,
    cluster: PathLike = None,
    slurm: bool = False,
    token_file: PathLike = None,
    dtype: str = "float64",
    shared_b: bool = False,
) -> Dict[str, Any]:
    """Measure the workers for products of ``shape`` (n, or (n, k, m)):
    per worker, the fits of sending, computing and returning one product."""
    if isinstance(shape, int):
        shape = (shape, shape, shape)
    return json.loads(
        _native.calibrate(
            tuple(shape),
            workers=_workers(workers),
            cluster=_path(cluster),
            slurm=slurm,
            token_file=_path(token_file),
            dtype=dtype,
            shared_b=shared_b,
        )
    )


class LocalCluster:
    """Worker daemons inside this process on loopback, to try everything on
    one machine (as ``dls demo`` does). ``emulate``: per worker, (link rate
    in MB/s or None, slowdown ≥ 1), to make them unequal; by default ``n``
    plain workers. Use it as a context manager; :attr:`workers` is what
    ``workers=`` takes. Given itself as ``workers=``, it also keeps what
    each batch measured, so that the next batch of the same products is
    not calibrated again."""

    @_translated
    def __init__(self, n: int = 4, emulate: Optional[Iterable[Tuple[Optional[float], float]]] = None) -> None:
        specs: List[Tuple[Optional[float], float]] = (
            [(None, 1.0)] * n if emulate is None else [(r, float(s)) for r, s in emulate]
        )
        self._native = _native.NativeLocalCluster(specs)
        self.workers: List[str] = list(self._native.addresses)
        self._models = tempfile.mkdtemp(prefix="dls-models-")

    def _model_for(self, a: np.ndarray, b: np.ndarray) -> Tuple[str, int]:
        """The model file of batches of A and B's kind of product (shape,
        type, one B shared or not) and how many batches it learned from."""
        n, k = a.shape[-2:]
        m = b.shape[-1]
        shared = "-shared" if b.ndim == 2 else ""
        path = os.path.join(self._models, f"model-{n}x{k}x{m}-{a.dtype}{shared}.json")
        try:
            with open(path, encoding="utf-8") as f:
                return path, int(json.load(f).get("batches", 0))
        except (OSError, ValueError):
            return path, 0

    def _platform_for(self, a: np.ndarray, b: np.ndarray) -> Tuple[str, bool]:
        """The platform file one product of A and B's kind (shape, type)
        was calibrated into, and whether an earlier product wrote it."""
        (n, k), m = a.shape, b.shape[-1]
        path = os.path.join(self._models, f"product-{n}x{k}x{m}-{a.dtype}.toml")
        return path, os.path.exists(path)

    def close(self) -> None:
        """Stop the daemons and forget what their batches taught."""
        self._native.close()
        shutil.rmtree(self._models, ignore_errors=True)

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
