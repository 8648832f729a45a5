//! `dls run`: the batch from its flags, a session run start to end, and
//! its outputs. With `--output`, the run is resumable (`output::resume`):
//! a run stopped by a signal or a dead master is finished by the same
//! command.

use crate::cli::args::{runtime, RoundingArg, RunArgs};
use crate::cli::commands::session_workers;
use crate::cli::console::{progress_bar, stop_signal};
use crate::cli::outputs;
use crate::config::platform_file::PlatformFile;
use crate::learn::Model;
use crate::output::journal::{FileId, Identity, Inputs};
use crate::output::resume::Resumable;
use crate::runtime::batch::Batch;
use crate::runtime::shell::RunOptions;
use crate::session::{self, BatchRun, RunConfig};
use anyhow::{bail, Result};
use dls_lp::Rounding;
use dls_protocol::Form;
use std::io::Write;
use std::path::PathBuf;

fn batch_of(args: &RunArgs) -> Result<Batch> {
    if args.batch == Some(0) {
        bail!("--batch 0: a batch needs at least one product");
    }
    match &args.input {
        Some(files) => {
            // C goes to --output as it arrives, or nowhere: never held whole.
            let b = crate::output::npy::read_batch(&files[0], &files[1], &args.products.expect()?, false)?;
            if let Some(m) = args.batch {
                if m != b.count {
                    bail!(
                        "--batch {m} disagrees with {}, which holds {} matrices",
                        files[0].display(),
                        b.count
                    );
                }
            }
            if b.count == 0 {
                bail!(
                    "{} holds no matrix: a batch needs at least one product",
                    files[0].display()
                );
            }
            Ok(b)
        }
        None => {
            let (Some(m), Some((_, flag))) = (args.batch, args.products.shape()?) else {
                bail!("give --batch M and --size n or --shape n,k,m (or --input A.npy B.npy)");
            };
            let form = args.products.form(None)?;
            let what = match flag {
                "--size" => format!("--batch {m} --size {}", form.shape.n),
                _ => format!("--batch {m} --shape {},{},{}", form.shape.n, form.shape.k, form.shape.m),
            };
            // Random inputs are made as chunks are sent: the master holds a
            // chunk's A and B at a time, and the C of each product it checks.
            crate::runtime::batch::check_fits(1, &form, true, crate::runtime::batch::available_memory(), &what)?;
            Batch::random_form(form, m, args.seed).map_err(|e| anyhow::anyhow!("{what}: {e}"))
        }
    }
}

fn run_config(args: &RunArgs) -> Result<RunConfig> {
    if let Some(f) = args.straggler {
        if !(f.is_finite() && f >= 1.0) {
            bail!("--straggler must be a factor of at least 1 (got {f})");
        }
    }
    Ok(RunConfig {
        strategy: args.strategy,
        ports: args.ports.0,
        pace: !args.no_pace,
        rounding: match args.rounding {
            RoundingArg::Paper => Rounding::Paper,
            RoundingArg::Refined => Rounding::Refined,
        },
        verify: args.verify,
        seed: args.seed,
        open_after: crate::session::OPEN_AFTER,
        options: RunOptions {
            max_chunk_bytes: args.chunk_mb << 20,
            straggler: args.straggler,
            adapt: !args.no_adapt,
            ..RunOptions::default()
        },
    })
}

/// The model file to learn into (`--learn`, `--model`) and what it holds.
fn model_of(args: &RunArgs, form: &Form) -> Result<Option<(PathBuf, Model)>> {
    crate::learn::model_file(args.model.as_deref(), args.workers.cluster.as_deref(), args.learn, form)
}

pub fn run(args: &RunArgs) -> Result<()> {
    // Chunks stream through several threads: one heap keeps what they
    // free for the next chunk, not a heap per thread.
    dls_common::one_heap();
    let inputs: Vec<PathBuf> = args.input.clone().unwrap_or_default();
    let one = crate::cli::product_cmd::job_of(args)?;
    for (path, what) in [
        (&args.output, "--output"),
        (&args.trace, "--trace"),
        (&args.gantt, "--gantt"),
    ] {
        if let Some(p) = path {
            outputs::check_writable(p, what, &inputs)?;
        }
    }
    if let Some(job) = one {
        return crate::cli::product_cmd::run(args, job);
    }
    let reach = session_workers(&args.workers, args.require_all)?;
    let cluster = &reach.cluster;
    let whole = batch_of(args)?;
    if let Some(p) = &args.output {
        // C's values and the .npy header.
        let bytes = whole
            .form
            .out_bytes(1)
            .saturating_mul(whole.count as u64)
            .saturating_add(128);
        outputs::check_space(p, bytes, "--output")?;
    }
    // C is written into --output in place as it arrives (renamed to its
    // name once complete) and journalled, so that a run whose master died
    // is finished by the same command; or C is not kept at all.
    let mut out = match &args.output {
        Some(p) => Some(Resumable::open(
            p,
            &identity_of(args, &whole)?,
            &whole.form,
            args.restart,
        )?),
        None => None,
    };
    let batch = match &out {
        Some(o) if o.resumed() > 0 => {
            eprintln!(
                "resuming: {} of {} products are in from an earlier run; computing the other {}",
                o.resumed(),
                whole.count,
                whole.count - o.resumed()
            );
            whole.subset(o.todo())
        }
        _ => whole.clone(),
    };
    if batch.count == 0 {
        return finish_resumed(args, out, whole.count);
    }
    let given = match &args.platform {
        Some(p) => {
            let (platform, note) = PlatformFile::load_for(p, &batch.form)?;
            if let Some(n) = note {
                eprintln!("note: {n}");
            }
            Some(platform)
        }
        None => cluster.known_platform().transpose()?,
    };
    let cfg = run_config(args)?;
    let mut model = model_of(args, &batch.form)?;
    let mut discard = crate::runtime::data::Discard;
    let bar = progress_bar(batch.count, "products returned");
    let sink: &mut dyn crate::runtime::data::Sink = match out.as_mut() {
        Some(o) => o,
        None => &mut discard,
    };
    let learning = model.as_mut().map(|m| &mut m.1);
    let done = runtime()?.block_on(async {
        tokio::select! {
            done = session::run(&reach, given, learning, &batch, &cfg, sink, |k| bar.inc(k as u64)) => Some(done),
            () = stop_signal() => None,
        }
    });
    bar.finish_and_clear();
    let done = match done {
        Some(Ok(done)) => done,
        failed => return Err(given_up(failed.and_then(Result::err), out, args)),
    };
    if let Some((path, m)) = model.as_mut() {
        m.observe(&done.report)?;
        m.save(path)?;
        eprintln!("learned from this batch: {} ({} batch(es))", path.display(), m.batches);
    }
    for note in done.plan.notes.iter() {
        eprintln!("note: {note}");
    }
    for f in &done.report.failures {
        eprintln!(
            "warning: lost worker {} ({}); {} product(s) redone elsewhere",
            f.worker, f.reason, f.products_lost
        );
    }
    if let (Some(first), n) = (done.report.adaptations.first(), done.report.adaptations.len()) {
        eprintln!(
            "online correction: {n} time(s), from round {} at {:.3} s (--no-adapt keeps the planned sizes)",
            first.round, first.at
        );
    }
    for e in &done.report.enrolments {
        eprintln!(
            "online correction enrolled {} at {:.3} s for {} product(s): the workers enrolled fell behind",
            e.workers.join(", "),
            e.at,
            e.products
        );
    }
    write_outputs(args, &batch, done, out)
}

/// The batch `args` names, as a journal records it.
fn identity_of(args: &RunArgs, batch: &Batch) -> Result<Identity> {
    let inputs = match &args.input {
        Some(files) => Inputs::Files {
            a: FileId::of(&files[0])?,
            b: FileId::of(&files[1])?,
        },
        None => Inputs::Random {
            seed: args.seed,
            generator: crate::runtime::random::GENERATOR.into(),
        },
    };
    Ok(Identity {
        form: batch.form.to_string(),
        count: batch.count,
        inputs,
    })
}

/// The run stopped (`failed`, or a signal when `None`): what C holds so far
/// is made durable, and the error says how to go on.
fn given_up(failed: Option<session::RunError>, out: Option<Resumable>, args: &RunArgs) -> anyhow::Error {
    let why = match failed {
        Some(e) => anyhow::Error::new(e),
        None => anyhow::anyhow!("interrupted"),
    };
    let Some(mut out) = out else { return why };
    let output = args
        .output
        .as_deref()
        .map_or_else(|| "the output".into(), |p| p.display().to_string());
    match out.keep() {
        Ok(()) => anyhow::anyhow!(
            "{why:#}; the results received are kept: run the same command again to finish {output} (--restart starts over)"
        ),
        Err(e) => anyhow::anyhow!("{why:#}; the results received could not all be journalled ({e:#})"),
    }
}

/// Every product was already in (an earlier run died after its last
/// result): give the output its name.
fn finish_resumed(args: &RunArgs, out: Option<Resumable>, count: usize) -> Result<()> {
    let Some(out) = out else {
        bail!("the batch is empty: give at least one product");
    };
    let path = out.finish()?;
    eprintln!(
        "all {count} products were in from an earlier run: wrote C to {}",
        path.display()
    );
    if args.json {
        println!("{}", serde_json::json!({ "load": 0, "resumed": count, "output": path }));
    }
    Ok(())
}

/// C, the trace, the chart and the summary of a finished run. Each is
/// written even when an earlier one failed, and the summary always
/// prints; the failures are reported together at the end.
fn write_outputs(args: &RunArgs, batch: &Batch, mut done: BatchRun, out: Option<Resumable>) -> Result<()> {
    let mut failed: Vec<String> = Vec::new();
    if let Some(o) = out {
        done.report.resumed = o.resumed();
        match o.finish() {
            Ok(p) => eprintln!("wrote C to {}", p.display()),
            Err(e) => failed.push(format!("C: {e:#}")),
        }
    }
    if let Some(path) = &args.trace {
        match done.trace.write(path) {
            Ok(()) => eprintln!("wrote trace to {} (open it in https://ui.perfetto.dev)", path.display()),
            Err(e) => failed.push(format!("{e:#}")),
        }
    }
    if let Some(path) = &args.gantt {
        let title = format!("{} products of {}, {}", batch.count, batch.form, done.plan.strategy);
        let svg = crate::output::gantt::svg(&done.trace, &title);
        match crate::output::atomic_write(path, |f| f.write_all(svg.as_bytes())) {
            Ok(()) => eprintln!("wrote Gantt chart to {}", path.display()),
            Err(e) => failed.push(format!("writing {}: {e}", path.display())),
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&done.report)?);
    } else {
        print!("{}", done.report.table());
    }
    if !failed.is_empty() {
        bail!("the batch completed, but {}", failed.join("; "));
    }
    Ok(())
}
