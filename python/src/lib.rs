//! `dls._native`: the master's Rust API for Python. Batches run on a tokio
//! runtime of their own with the GIL released; the calling thread waits in
//! slices of 100 ms and checks for signals between them, so Ctrl-C stops
//! a batch: the runtime is shut down, which closes every connection, and
//! the workers are free at once. The Python package `dls` wraps this
//! module (`dls/__init__.py`); no protocol is implemented here. NumPy
//! inputs are read in place, a chunk at a time (`NumpyArray`, the one
//! unsafe block of the crate), and C is handed to NumPy without a copy.

use dls_master::config::cluster::Cluster;
use dls_master::config::platform_file::PlatformFile;
use dls_master::session::Batch;
use dls_master::session::RunOptions;
use dls_master::session::{self, RunConfig};
use dls_master::session::{local, Emulated, LocalWorkers};
use dls_master::session::{External, Source};
use dls_protocol::{DType, Form, Shape, Values};
use numpy::{IntoPyArray, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

mod product;

create_exception!(_native, Error, PyException, "Anything dls refuses or fails at.");
create_exception!(
    _native,
    InputError,
    Error,
    "The arrays, shapes, types or arguments are not what dls takes."
);
create_exception!(
    _native,
    ConnectError,
    Error,
    "No worker could be reached, or none calibrated."
);
create_exception!(_native, RunError, Error, "The batch did not complete.");

pub(crate) fn input(e: impl std::fmt::Display) -> PyErr {
    InputError::new_err(e.to_string())
}

/// The message of an error with its causes, as the command line prints it.
pub(crate) fn chain(e: &anyhow::Error) -> String {
    format!("{e:#}")
}

fn runtime() -> PyResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::new_err(format!("starting the async runtime: {e}")))
}

/// Run `fut` to its end with the GIL released, checking for signals (and
/// calling `tick`) every 100 ms. On a signal (Ctrl-C raises
/// KeyboardInterrupt) the runtime is shut down, dropping the batch and
/// closing its connections, and the signal's exception is raised.
pub(crate) fn wait<T: Send + 'static, E: Send + 'static>(
    py: Python<'_>,
    fut: impl std::future::Future<Output = Result<T, E>> + Send + 'static,
    mut tick: impl FnMut(Python<'_>) -> PyResult<()>,
) -> PyResult<Result<T, E>> {
    let rt = runtime()?;
    let (tx, mut rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    loop {
        let rx = &mut rx;
        let got = py.detach(move || rx.recv_timeout(Duration::from_millis(100)));
        match got {
            Ok(result) => return Ok(result),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(RunError::new_err("the batch's task ended without an answer"))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals().and_then(|()| tick(py)) {
                    py.detach(|| rt.shutdown_timeout(Duration::from_secs(2)));
                    return Err(e);
                }
            }
        }
    }
}

/// Run `fut` (see [`wait`]); with `progress`, how many of `total` `what`
/// `stored` counts goes to Python's sys.stderr (a terminal or a notebook).
/// A failed run raises `ConnectError` or `RunError`.
pub(crate) fn wait_run<T: Send + 'static>(
    py: Python<'_>,
    fut: impl std::future::Future<Output = Result<T, session::RunError>> + Send + 'static,
    progress: bool,
    stored: &std::sync::atomic::AtomicUsize,
    total: usize,
    what: &str,
) -> PyResult<T> {
    let mut shown = usize::MAX;
    let mut tick = |py: Python<'_>| -> PyResult<()> {
        let now = stored.load(std::sync::atomic::Ordering::Relaxed);
        if progress && now != shown {
            shown = now;
            let line = format!("\rdls: {now}/{total} {what} returned");
            py.import("sys")?.getattr("stderr")?.call_method1("write", (line,))?;
        }
        Ok(())
    };
    let done = wait(py, fut, &mut tick)?;
    if progress {
        tick(py)?;
        py.import("sys")?.getattr("stderr")?.call_method1("write", ("\n",))?;
    }
    done.map_err(|e| match e {
        session::RunError::Workers(e) => ConnectError::new_err(chain(&e)),
        session::RunError::Batch(e) => RunError::new_err(chain(&e)),
    })
}

/// How to reach the workers: all of them or those that answer,
/// encrypted (which needs a token) or not.
pub(crate) fn reach_of(
    cluster: Cluster,
    token: Option<dls_protocol::Token>,
    require_all: bool,
    encrypt: bool,
) -> PyResult<session::Workers> {
    if encrypt && token.is_none() {
        return Err(input(
            "encrypt=True needs a token (the keys are derived from it): give token_file or set DLS_TOKEN",
        ));
    }
    Ok(session::Workers {
        require_all,
        encrypt,
        ..session::Workers::new(cluster, token)
    })
}

/// C handed to NumPy without a copy, in `shape`.
pub(crate) fn numpy_of(py: Python<'_>, c: Values, shape: &[usize]) -> PyResult<Py<PyAny>> {
    Ok(match c {
        Values::F64(v) => v.into_pyarray(py).reshape(shape.to_vec())?.into_any().unbind(),
        Values::F32(v) => v.into_pyarray(py).reshape(shape.to_vec())?.into_any().unbind(),
    })
}

/// The workers: a "host:port,..." list, a cluster file, or this Slurm
/// job's nodes at `port`; exactly one.
pub(crate) fn cluster_of(
    workers: Option<String>,
    cluster: Option<PathBuf>,
    slurm: bool,
    port: u16,
) -> PyResult<Cluster> {
    let c = match (workers, cluster, slurm) {
        (Some(w), None, false) => Cluster::from_list(&w),
        (None, Some(p), false) => Cluster::load(&p),
        (None, None, true) => session::slurm_hosts().and_then(|h| Cluster::from_hosts(&h, port)),
        (None, None, false) => return Err(input("give the workers: workers=, cluster= or slurm=True")),
        _ => return Err(input("give the workers one way only: workers=, cluster= or slurm=True")),
    };
    let c = c.map_err(|e| input(chain(&e)))?;
    c.check_distinct().map_err(|e| input(chain(&e)))?;
    Ok(c)
}

/// A C-contiguous NumPy array read where its values lie, a chunk at a time
/// as the chunks are sent: the batch is never copied whole.
#[derive(Debug)]
struct NumpyArray {
    /// Keeps the array, and so its memory, alive; holding a reference also
    /// keeps NumPy from resizing it (`ndarray.resize` checks references).
    _owner: Py<PyAny>,
    /// Address of the first value; `len` values of `dtype` from there.
    addr: usize,
    len: usize,
    dtype: DType,
}

impl External for NumpyArray {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, range: std::ops::Range<usize>) -> std::io::Result<Values> {
        if range.end > self.len || range.start > range.end {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("values {range:?} of {}", self.len),
            ));
        }
        let mut v = Values::try_zeros(self.dtype, range.len())
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::OutOfMemory, "a chunk of the inputs"))?;
        if range.is_empty() {
            return Ok(v);
        }
        let size = self.dtype.size() as usize;
        let dst = v.as_bytes_mut();
        // SAFETY: `addr` is the first of `len` contiguous values of `dtype`
        // (checked by `as_slice` when the array was taken) in memory owned
        // by the array `_owner` keeps alive, which NumPy neither frees nor
        // moves while we hold it; `range` lies within `len` (checked
        // above), so the source is readable for `range.len() * size` bytes;
        // `dst` is a fresh buffer of exactly that size, so the two do not
        // overlap. As with any extension that releases the GIL over its
        // inputs, the caller must not write into the arrays while the batch
        // runs (the docs say so).
        unsafe {
            std::ptr::copy_nonoverlapping(
                (self.addr as *const u8).add(range.start * size),
                dst.as_mut_ptr(),
                range.len() * size,
            );
        }
        Ok(v)
    }
}

/// The source of a C-contiguous array (an error naming `what` otherwise).
fn source_of<T: numpy::Element>(
    owner: &Bound<'_, PyAny>,
    x: &PyReadonlyArrayDyn<'_, T>,
    dtype: DType,
    what: &str,
) -> PyResult<Source> {
    let values = x.as_slice().map_err(|_| input(format!("{what} is not C-contiguous")))?;
    Ok(Source::External(Arc::new(NumpyArray {
        _owner: owner.clone().unbind(),
        addr: values.as_ptr() as usize,
        len: values.len(),
        dtype,
    })))
}

/// A and B taken from NumPy: their shapes and where their values are.
pub(crate) struct Arrays {
    pub a_shape: Vec<usize>,
    pub b_shape: Vec<usize>,
    pub a: Source,
    pub b: Source,
    pub dtype: DType,
}

/// A and B as arrays of `T` (of type `dtype`), or `None` when they are
/// not both arrays of `T`.
pub(crate) fn arrays_of<T: numpy::Element>(
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    dtype: DType,
) -> PyResult<Option<Arrays>> {
    let (Ok(x), Ok(y)) = (
        a.extract::<PyReadonlyArrayDyn<'_, T>>(),
        b.extract::<PyReadonlyArrayDyn<'_, T>>(),
    ) else {
        return Ok(None);
    };
    Ok(Some(Arrays {
        a_shape: x.shape().to_vec(),
        b_shape: y.shape().to_vec(),
        a: source_of(a, &x, dtype, "A")?,
        b: source_of(b, &y, dtype, "B")?,
        dtype,
    }))
}

/// A batch from NumPy arrays: A of shape (M, n, k) and B of shape (M, k, m)
/// or (k, m), both C-contiguous, both float32 or both float64 (the
/// Python side makes them so). Their values are read in place, a chunk at
/// a time, as the chunks are sent.
fn batch_of(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<Batch> {
    let arrays = match arrays_of::<f64>(a, b, DType::F64)? {
        Some(x) => Some(x),
        None => arrays_of::<f32>(a, b, DType::F32)?,
    };
    let Some(Arrays {
        a_shape: sa,
        b_shape: sb,
        a: src_a,
        b: src_b,
        dtype,
    }) = arrays
    else {
        return Err(input("A and B must be NumPy arrays, both float32 or both float64"));
    };
    let dim = |v: usize, what: &str| u32::try_from(v).map_err(|_| input(format!("{what} = {v} is too large")));
    let [count, n, k] = sa[..] else {
        return Err(input(format!("A has shape {sa:?}; it must be (M, n, k)")));
    };
    let (shared_b, bk, m) = match sb[..] {
        [mb, bk, m] if mb == count => (false, bk, m),
        [mb, _, _] => {
            return Err(input(format!(
                "A holds {count} matrices but B holds {mb}: they must pair up"
            )))
        }
        [bk, m] => (true, bk, m),
        _ => return Err(input(format!("B has shape {sb:?}; it must be (M, k, m) or (k, m)"))),
    };
    if bk != k {
        return Err(input(format!(
            "A's matrices are {n}×{k} but B's are {bk}×{m}: B needs {k} rows (A is n×k, B k×m)"
        )));
    }
    let form = Form {
        shape: Shape {
            n: dim(n, "n")?,
            k: dim(k, "k")?,
            m: dim(m, "m")?,
        },
        dtype,
        shared_b,
    };
    Batch::from_sources(form, count, src_a, src_b).map_err(|e| input(chain(&e)))
}

fn strategy_of(s: &str) -> PyResult<dls_lp::Strategy> {
    s.parse().map_err(input)
}

/// The port model asked for: `None` is the one measured.
pub(crate) fn ports_of(ports: Option<u8>) -> PyResult<Option<dls_lp::Ports>> {
    match ports {
        None => Ok(None),
        Some(1) => Ok(Some(dls_lp::Ports::One)),
        Some(2) => Ok(Some(dls_lp::Ports::Two)),
        Some(p) => Err(input(format!(
            "ports must be 1, 2 or None (the model measured) (got {p})"
        ))),
    }
}

fn rounding_of(s: &str) -> PyResult<dls_lp::Rounding> {
    match s {
        "refined" => Ok(dls_lp::Rounding::Refined),
        "paper" => Ok(dls_lp::Rounding::Paper),
        _ => Err(input(format!("rounding {s:?}: refined or paper"))),
    }
}

/// What a finished batch left: C, the summary (JSON), the trace (JSON)
/// and its Gantt chart (SVG).
#[pyclass(module = "dls._native")]
pub(crate) struct NativeRun {
    #[pyo3(get)]
    pub c: Py<PyAny>,
    #[pyo3(get)]
    pub summary: String,
    #[pyo3(get)]
    pub trace: String,
    #[pyo3(get)]
    pub gantt: String,
}

/// Run a batch of products: see `dls.run`.
#[pyfunction]
#[pyo3(signature = (a, b, *, workers=None, cluster=None, slurm=false, worker_port=7070, token_file=None, strategy="best", platform=None, verify=3, seed=0, progress=false, encrypt=false, require_all=false, ports=None, rounding="refined", straggler=None, adapt=true, chunk_mb=64, learn=false, model=None))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    workers: Option<String>,
    cluster: Option<PathBuf>,
    slurm: bool,
    worker_port: u16,
    token_file: Option<PathBuf>,
    strategy: &str,
    platform: Option<PathBuf>,
    verify: usize,
    seed: u64,
    progress: bool,
    encrypt: bool,
    require_all: bool,
    ports: Option<u8>,
    rounding: &str,
    straggler: Option<f64>,
    adapt: bool,
    chunk_mb: u64,
    learn: bool,
    model: Option<PathBuf>,
) -> PyResult<NativeRun> {
    let batch = batch_of(a, b)?;
    let mut model = dls_master::learn::model_file(model.as_deref(), cluster.as_deref(), learn, &batch.form)
        .map_err(|e| input(chain(&e)))?;
    if batch.count == 0 {
        return Err(input("the batch is empty: A holds no matrix"));
    }
    let cluster = cluster_of(workers, cluster, slurm, worker_port)?;
    let token = session::token(token_file.as_deref(), Some(&cluster)).map_err(|e| input(chain(&e)))?;
    let given = match &platform {
        Some(p) => Some(PlatformFile::load_for(p, &batch.form).map_err(|e| input(chain(&e)))?.0),
        None => cluster.known_platform().transpose().map_err(|e| input(chain(&e)))?,
    };
    if let Some(f) = straggler.filter(|f| !(f.is_finite() && *f >= 1.0)) {
        return Err(input(format!("straggler must be a factor of at least 1 (got {f})")));
    }
    if !(1..=1 << 20).contains(&chunk_mb) {
        return Err(input(format!("chunk_mb must be from 1 to 1048576 (got {chunk_mb})")));
    }
    let cfg = RunConfig {
        strategy: strategy_of(strategy)?,
        ports: ports_of(ports)?,
        pace: true,
        rounding: rounding_of(rounding)?,
        verify,
        seed,
        open_after: dls_master::session::OPEN_AFTER,
        options: RunOptions {
            max_chunk_bytes: chunk_mb << 20,
            straggler,
            adapt,
            ..RunOptions::default()
        },
    };
    let reach = reach_of(cluster, token, require_all, encrypt)?;
    let mut sink = batch.memory_sink().map_err(|e| input(format!("{e:#}")))?;
    let (form, total) = (batch.form, batch.count);
    let stored = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = stored.clone();
    let fut = async move {
        let on_chunk = move |k: usize| {
            counter.fetch_add(k, std::sync::atomic::Ordering::Relaxed);
        };
        let learning = model.as_mut().map(|m| &mut m.1);
        let done = session::run(&reach, given, learning, &batch, &cfg, &mut sink, on_chunk).await?;
        // What this batch taught, kept for the next (as `dls run --learn`).
        if let Some((path, m)) = model.as_mut() {
            m.observe(&done.report)
                .and_then(|()| m.save(path))
                .map_err(session::RunError::Batch)?;
        }
        Ok::<_, session::RunError>((done, sink.0))
    };
    let (done, c) = wait_run(py, fut, progress, &stored, total, "products")?;
    let shape = [done.report.load as usize, form.shape.n as usize, form.shape.m as usize];
    let c = numpy_of(py, c, &shape)?;
    let title = format!("{} products of {form}, {}", done.report.load, done.plan.strategy);
    Ok(NativeRun {
        c,
        summary: serde_json::to_string(&done.report).map_err(|e| Error::new_err(e.to_string()))?,
        trace: done.trace.to_json().to_string(),
        gantt: dls_master::output::gantt::svg(&done.trace, &title),
    })
}

/// Plan `load` products on the platform file's workers: see `dls.plan`.
#[pyfunction]
#[pyo3(signature = (platform, load, strategy="best", ports=None, pace=true))]
fn plan(platform: PathBuf, load: u64, strategy: &str, ports: Option<u8>, pace: bool) -> PyResult<String> {
    let plat = PlatformFile::load(&platform).map_err(|e| input(chain(&e)))?;
    let ports = ports_of(ports)?.unwrap_or_else(|| plat.measured_ports());
    let plat = plat.for_ports(ports);
    let req = dls_lp::Request {
        ports,
        ..dls_lp::Request::new(load, strategy_of(strategy)?)
    };
    // As `dls plan`: paced sends where they shorten the plan, unless told not to.
    let (plan, efficiency) =
        dls_lp::paced::plan_weighed(&plat, &req, pace).map_err(|e| input(format!("planning {load} units: {e}")))?;
    serde_json::to_string(&dls_master::output::plan_report::PlanJson::new(
        &plat, &plan, efficiency,
    ))
    .map_err(|e| Error::new_err(e.to_string()))
}

/// Calibrate the workers for products of `shape`: see `dls.calibrate`.
#[pyfunction]
#[pyo3(signature = (shape, *, workers=None, cluster=None, slurm=false, worker_port=7070, token_file=None, dtype="float64", shared_b=false))]
#[allow(clippy::too_many_arguments)]
fn calibrate(
    py: Python<'_>,
    shape: (u32, u32, u32),
    workers: Option<String>,
    cluster: Option<PathBuf>,
    slurm: bool,
    worker_port: u16,
    token_file: Option<PathBuf>,
    dtype: &str,
    shared_b: bool,
) -> PyResult<String> {
    let (n, k, m) = shape;
    if n == 0 || k == 0 || m == 0 {
        return Err(input(format!("shape {shape:?}: every dimension must be at least 1")));
    }
    let dtype = DType::parse(dtype).ok_or_else(|| input(format!("dtype {dtype:?}: float32 or float64")))?;
    let form = Form {
        shape: Shape { n, k, m },
        dtype,
        shared_b,
    };
    let cluster = cluster_of(workers, cluster, slurm, worker_port)?;
    let token = session::token(token_file.as_deref(), Some(&cluster)).map_err(|e| input(chain(&e)))?;
    let reach = session::Workers::new(cluster, token);
    let fut = async move {
        reach
            .with_pool(async |pool, _| Ok(reach.calibrate(pool, form, false).await?.0))
            .await
    };
    let cal = wait(py, fut, |_| Ok(()))?.map_err(|e| ConnectError::new_err(chain(&e)))?;
    serde_json::to_string(&cal).map_err(|e| Error::new_err(e.to_string()))
}

/// Worker daemons in this process on loopback: see `dls.LocalCluster`.
#[pyclass(module = "dls._native")]
struct NativeLocalCluster {
    rt: Option<tokio::runtime::Runtime>,
    workers: Option<LocalWorkers>,
    #[pyo3(get)]
    addresses: Vec<String>,
}

#[pymethods]
impl NativeLocalCluster {
    /// `emulate`: per worker, (link rate in MB/s or None, slowdown ≥ 1).
    #[new]
    fn new(py: Python<'_>, emulate: Vec<(Option<f64>, f64)>) -> PyResult<Self> {
        if emulate.is_empty() {
            return Err(input("a local cluster needs at least one worker"));
        }
        for &(rate, slow) in &emulate {
            if rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) || !(slow.is_finite() && slow >= 1.0) {
                return Err(input(format!(
                    "emulation ({rate:?}, {slow}): a link rate is a positive number of MB/s, a slowdown at least 1"
                )));
            }
        }
        let specs: Vec<Emulated> = emulate
            .iter()
            .enumerate()
            .map(|(i, &(link_rate, slowdown))| Emulated {
                name: format!("w{i}"),
                link_rate,
                slowdown,
                speed_change: None,
                memory: None,
            })
            .collect();
        let rt = runtime()?;
        let workers = py
            .detach(|| rt.block_on(local::start(&specs)))
            .map_err(|e| Error::new_err(chain(&e)))?;
        let addresses = workers.cluster.worker.iter().map(|w| w.address.clone()).collect();
        Ok(NativeLocalCluster {
            rt: Some(rt),
            workers: Some(workers),
            addresses,
        })
    }

    /// Stop the daemons (idempotent).
    fn close(&mut self, py: Python<'_>) {
        if let (Some(rt), Some(w)) = (self.rt.take(), self.workers.take()) {
            py.detach(|| {
                rt.block_on(w.stop());
                rt.shutdown_timeout(Duration::from_secs(2));
            });
        }
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("ConnectError", py.get_type::<ConnectError>())?;
    m.add("RunError", py.get_type::<RunError>())?;
    m.add_class::<NativeRun>()?;
    m.add_class::<NativeLocalCluster>()?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(product::product, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate, m)?)?;
    Ok(())
}
