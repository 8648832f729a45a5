//! `dls run` for one large product: two 2-D `--input` files, or
//! `--product` with `--size`/`--shape` (random); C into `--output` (a
//! (n, m) `.npy` file, written a piece at a time, named once complete),
//! the summary, trace and Gantt chart.

use crate::cli::args::{runtime, DistributionArg, RunArgs};
use crate::cli::commands::session_workers;
use crate::cli::console::{progress_bar, stop_signal};
use crate::cli::outputs;
use crate::config::platform_file::PlatformFile;
use crate::output::npy::NpyWriter;
use crate::output::product::{self, ProductReport};
use crate::runtime::product::{Blocks, ProductJob};
use crate::session::{ProductConfig, ProductRun};
use anyhow::{anyhow, bail, Result};
use dls_lp::product::Distribution;
use std::io::Write;
use std::sync::Arc;

/// The one large product `args` name, if any: `--product` (random), or
/// two 2-D `--input` files; `None` for a batch.
pub fn job_of(args: &RunArgs) -> Result<Option<ProductJob>> {
    match (&args.input, args.product) {
        (Some(files), product) => {
            match crate::output::npy::read_product(&files[0], &files[1], &args.products.expect()?)? {
                None if product => bail!("--product with --input: the two files must be 2-D, A (n, k) and B (k, m)"),
                job => Ok(job),
            }
        }
        (None, true) => random_job(args).map(Some),
        (None, false) => Ok(None),
    }
}

/// The random product `--product` asks for.
fn random_job(args: &RunArgs) -> Result<ProductJob> {
    let Some((shape, _)) = args.products.shape()? else {
        bail!("--product: give its shape with --size n or --shape n,k,m");
    };
    let (n, k, m) = (shape.n as usize, shape.k as usize, shape.m as usize);
    let dtype = args.products.dtype.unwrap_or(dls_protocol::DType::F64);
    let bytes = ((n * k + k * m) as u64).saturating_mul(dtype.size());
    if let Some(avail) = crate::runtime::batch::available_memory().filter(|&a| bytes > a) {
        bail!(
            "--product {n}×{k} by {k}×{m}: random A and B need {} in the master, more than the {} available (give them as --input files, read as they are sent)",
            crate::runtime::batch::human_bytes(bytes),
            crate::runtime::batch::human_bytes(avail)
        );
    }
    ProductJob::random(n, k, m, dtype, args.seed)
}

fn config(args: &RunArgs) -> ProductConfig {
    ProductConfig {
        distribution: match args.distribution {
            DistributionArg::Heterogeneous => Distribution::Heterogeneous,
            DistributionArg::Homogeneous => Distribution::Homogeneous,
        },
        ports: args.ports.0.map(|p| if p.is_one_port() { 1 } else { 2 }),
        ..ProductConfig::default()
    }
}

pub fn run(args: &RunArgs, job: ProductJob) -> Result<()> {
    // Panels and pieces come and go on many threads: give them back to
    // the system as they go (not for batches, whose chunk buffers glibc's
    // own reuse serves faster).
    dls_common::return_freed_buffers();
    if args.batch.is_some() || args.products.shared_b {
        bail!("one product (2-D inputs or --product) takes neither --batch nor --shared-b");
    }
    let reach = session_workers(&args.workers, args.require_all)?;
    let (n, _, m) = job.dims();
    let dtype = job.dtype();
    let given = match &args.platform {
        Some(p) => {
            let (platform, form) = PlatformFile::load_sized(p)?;
            let form = form.ok_or_else(|| {
                anyhow!(
                    "{}: the platform does not say which products it was measured for; one product needs that to cost its panels (dls calibrate writes it)",
                    p.display()
                )
            })?;
            Some((platform, form))
        }
        None => None,
    };
    let mut writer = match &args.output {
        Some(p) => {
            let bytes = ((n * m) as u64).saturating_mul(dtype.size()).saturating_add(128);
            outputs::check_space(p, bytes, "--output")?;
            Some(NpyWriter::matrix(p, dtype, n, m)?)
        }
        None => None,
    };
    let mut discard = crate::runtime::data::Discard;
    let sink: &mut dyn Blocks = match writer.as_mut() {
        Some(w) => w,
        None => &mut discard,
    };
    let bar = progress_bar(n * m, "elements of C returned");
    let cfg = config(args);
    let job = Arc::new(job);
    let done = runtime()?.block_on(async {
        tokio::select! {
            done = reach.run_product(given, job, &cfg, sink, |e| bar.inc(e as u64)) => Some(done),
            () = stop_signal() => None,
        }
    });
    bar.finish_and_clear();
    let done = match done {
        Some(Ok(d)) => d,
        Some(Err(e)) => return Err(e.into()),
        None => bail!("interrupted: no C was written"),
    };
    write_outputs(args, writer, &done, dtype)
}

/// C, the trace, the chart and the summary. Each is written even when an
/// earlier one failed, and the summary always prints.
fn write_outputs(
    args: &RunArgs,
    writer: Option<NpyWriter>,
    done: &ProductRun,
    dtype: dls_protocol::DType,
) -> Result<()> {
    let mut failed: Vec<String> = Vec::new();
    if let Some(w) = writer {
        match w.finish() {
            Ok(p) => eprintln!("wrote C to {}", p.display()),
            Err(e) => failed.push(format!("C: {e:#}")),
        }
    }
    for note in &done.plan.notes {
        eprintln!("note: {note}");
    }
    for l in &done.measured.losses {
        eprintln!(
            "warning: lost worker {} ({}); its {} element(s) of C cut again over the others",
            done.names[l.worker], l.reason, l.elements
        );
    }
    let trace = product::trace(&done.names, &done.plan, &done.measured);
    if let Some(path) = &args.trace {
        match trace.write(path) {
            Ok(()) => eprintln!("wrote trace to {} (open it in https://ui.perfetto.dev)", path.display()),
            Err(e) => failed.push(format!("{e:#}")),
        }
    }
    if let Some(path) = &args.gantt {
        let title = trace.title.clone().unwrap_or_default();
        let svg = crate::output::gantt::svg(&trace, &title);
        match crate::output::atomic_write(path, |f| f.write_all(svg.as_bytes())) {
            Ok(()) => eprintln!("wrote Gantt chart to {}", path.display()),
            Err(e) => failed.push(format!("writing {}: {e}", path.display())),
        }
    }
    let mut report = ProductReport::new(&done.names, &done.plan, &done.measured, dtype);
    report.master_cpu_secs = done.master_cpu_secs;
    report.waited = done.waited;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    if !failed.is_empty() {
        bail!("the product completed, but {}", failed.join("; "));
    }
    Ok(())
}
