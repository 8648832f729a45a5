//! One large product from NumPy: `dls.matmul(A, B)` with A (n, k) and B
//! (k, m), as `numpy.matmul` takes them. A and B are read in place, a
//! panel at a time; C comes back as an (n, m) array without a copy.

use crate::{arrays_of, chain, cluster_of, input, numpy_of, ports_of, reach_of, wait_run, Arrays, Error, NativeRun};
use dls_lp::product::Distribution;
use dls_master::config::platform_file::PlatformFile;
use dls_master::output::product::{trace, ProductReport};
use dls_master::session::{self, Matrix, MemoryC, ProductConfig, ProductJob};
use dls_protocol::{DType, Values};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;

fn distribution_of(s: &str) -> PyResult<Distribution> {
    match s {
        "heterogeneous" => Ok(Distribution::Heterogeneous),
        "homogeneous" => Ok(Distribution::Homogeneous),
        _ => Err(input(format!("distribution {s:?}: heterogeneous or homogeneous"))),
    }
}

/// A and B of one product from NumPy (both 2-D, C-contiguous, of one type).
fn job_of(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<ProductJob> {
    let arrays = match arrays_of::<f64>(a, b, DType::F64)? {
        Some(x) => Some(x),
        None => arrays_of::<f32>(a, b, DType::F32)?,
    };
    let Some(Arrays {
        a_shape, b_shape, a, b, ..
    }) = arrays
    else {
        return Err(input("A and B must be NumPy arrays, both float32 or both float64"));
    };
    let (&[n, k], &[bk, m]) = (&a_shape[..], &b_shape[..]) else {
        return Err(input(format!(
            "one product takes A of shape (n, k) and B of shape (k, m), not {a_shape:?} and {b_shape:?}"
        )));
    };
    if bk != k {
        return Err(input(format!(
            "A is {n}×{k} but B is {bk}×{m}: B needs {k} rows (A is n×k, B k×m)"
        )));
    }
    let matrix = |name: &str, src, r, c| Matrix::new(name, src, r, c, false).map_err(|e| input(chain(&e)));
    ProductJob::new(matrix("A", a, n, k)?, matrix("B", b, k, m)?).map_err(|e| input(chain(&e)))
}

/// One large product: see `dls.matmul`.
#[pyfunction]
#[pyo3(signature = (a, b, *, workers=None, cluster=None, slurm=false, worker_port=7070, token_file=None, platform=None, distribution="heterogeneous", ports=None, progress=false, encrypt=false, require_all=false, keep_platform=None))]
#[allow(clippy::too_many_arguments)]
pub fn product(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    workers: Option<String>,
    cluster: Option<PathBuf>,
    slurm: bool,
    worker_port: u16,
    token_file: Option<PathBuf>,
    platform: Option<PathBuf>,
    distribution: &str,
    ports: Option<u8>,
    progress: bool,
    encrypt: bool,
    require_all: bool,
    keep_platform: Option<PathBuf>,
) -> PyResult<NativeRun> {
    let job = Arc::new(job_of(a, b)?);
    let (n, _, m) = job.dims();
    let dtype = job.dtype();
    let cluster = cluster_of(workers, cluster, slurm, worker_port)?;
    let token = session::token(token_file.as_deref(), Some(&cluster)).map_err(|e| input(chain(&e)))?;
    let given = match &platform {
        Some(p) => {
            let (platform, form) = PlatformFile::load_sized(p).map_err(|e| input(chain(&e)))?;
            let form = form.ok_or_else(|| {
                input(format!(
                    "{}: the platform does not say which products it was measured for (dls calibrate writes it)",
                    p.display()
                ))
            })?;
            Some((platform, form))
        }
        None => None,
    };
    let cfg = ProductConfig {
        distribution: distribution_of(distribution)?,
        ports: ports_of(ports)?.map(|p| if p.is_one_port() { 1 } else { 2 }),
        ..ProductConfig::default()
    };
    let reach = reach_of(cluster, token, require_all, encrypt)?;
    let c = Values::try_zeros(dtype, n * m).ok_or_else(|| input(format!("no memory for C ({n}×{m})")))?;
    let stored = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = stored.clone();
    let fut = async move {
        let mut sink = MemoryC { c, m };
        let on_piece = move |e: usize| {
            counter.fetch_add(e, std::sync::atomic::Ordering::Relaxed);
        };
        let done = reach.run_product(given, job, &cfg, &mut sink, on_piece).await?;
        Ok::<_, session::RunError>((done, sink.c))
    };
    let (done, c) = wait_run(py, fut, progress, &stored, n * m, "elements of C")?;
    let c = numpy_of(py, c, &[n, m])?;
    let mut report = ProductReport::new(&done.names, &done.plan, &done.measured, dtype);
    report.master_cpu_secs = done.master_cpu_secs;
    report.waited = done.waited;
    // What this product calibrated, as a platform file for the next one: a
    // file that cannot be written costs the next product a calibration,
    // never this product's C.
    if let (Some(path), Some(cal)) = (&keep_platform, &done.calibrated) {
        let kept = (cal.to_toml().map_err(|e| chain(&e))).and_then(|text| {
            dls_master::output::atomic_write(path, |f| std::io::Write::write_all(f, text.as_bytes()))
                .map_err(|e| e.to_string())
        });
        if let Err(e) = kept {
            report
                .notes
                .push(format!("the costs calibrated were not kept ({}: {e})", path.display()));
        }
    }
    let t = trace(&done.names, &done.plan, &done.measured);
    let title = t.title.clone().unwrap_or_default();
    Ok(NativeRun {
        c,
        summary: serde_json::to_string(&report).map_err(|e| Error::new_err(e.to_string()))?,
        trace: t.to_json().to_string(),
        gantt: dls_master::output::gantt::svg(&t, &title),
    })
}
