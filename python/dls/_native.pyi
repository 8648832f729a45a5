# Type stubs of the compiled module (python/src/lib.rs).
from typing import List, Optional, Tuple

import numpy as np

__version__: str

class Error(Exception): ...
class InputError(Error): ...
class ConnectError(Error): ...
class RunError(Error): ...

class NativeRun:
    c: np.ndarray
    summary: str
    trace: str
    gantt: str

class NativeLocalCluster:
    addresses: List[str]
    def __init__(self, emulate: List[Tuple[Optional[float], float]]) -> None: ...
    def close(self) -> None: ...

def run(
    a: np.ndarray,
    b: np.ndarray,
    *,
    workers: Optional[str] = None,
    cluster: Optional[str] = None,
    slurm: bool = False,
    worker_port: int = 7070,
    token_file: Optional[str] = None,
    strategy: str = "best",
    platform: Optional[str] = None,
    verify: int = 3,
    seed: int = 0,
    progress: bool = False,
    encrypt: bool = False,
    require_all: bool = False,
    ports: int = 1,
    rounding: str = "refined",
    straggler: Optional[float] = None,
    adapt: bool = True,
    chunk_mb: int = 64,
    learn: bool = False,
    model: Optional[str] = None,
) -> NativeRun: ...
def product(
    a: np.ndarray,
    b: np.ndarray,
    *,
    workers: Optional[str] = None,
    cluster: Optional[str] = None,
    slurm: bool = False,
    worker_port: int = 7070,
    token_file: Optional[str] = None,
    platform: Optional[str] = None,
    distribution: str = "heterogeneous",
    ports: Optional[int] = None,
    progress: bool = False,
    encrypt: bool = False,
    require_all: bool = False,
    keep_platform: Optional[str] = None,
) -> NativeRun: ...
def plan(
    platform: str, load: int, strategy: str = "best", ports: Optional[int] = None, pace: bool = True
) -> str: ...
def calibrate(
    shape: Tuple[int, int, int],
    *,
    workers: Optional[str] = None,
    cluster: Optional[str] = None,
    slurm: bool = False,
    worker_port: int = 7070,
    token_file: Optional[str] = None,
    dtype: str = "float64",
    shared_b: bool = False,
) -> str: ...
