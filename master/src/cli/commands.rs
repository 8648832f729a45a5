//! What each `dls` subcommand does beyond parsing its flags.

use crate::cli::args::{cluster_of, runtime, token_of, Products, RoundingArg, RunArgs, Workers};
use crate::cli::outputs;
use crate::config::platform_file::PlatformFile;
use crate::learn::Model;
use crate::output::status::StatusRow;
use crate::output::trace::Trace;
use crate::runtime::batch::Batch;
use crate::runtime::calibrate;
use crate::runtime::link::{self, ConnectOptions};
use crate::runtime::shell::RunOptions;
use crate::session::{self, BatchRun, RunConfig};
use anyhow::{bail, Context, Result};
use dls_lp::{Ports, Rounding};
use dls_protocol::Form;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

pub fn calibrate(
    workers: &Workers,
    products: &Products,
    sizes: Option<&[u32]>,
    output: &Path,
    json: bool,
    require_all: bool,
) -> Result<()> {
    let form = products.form(Some(128))?;
    let forms: Vec<Form> = match sizes {
        None => vec![form],
        Some(list) => {
            if list.len() < 2 || list.contains(&0) || list.windows(2).any(|w| w[0] >= w[1]) {
                bail!("--sizes takes at least two sizes, each at least 1, in increasing order (as 64,128,256)");
            }
            list.iter()
                .map(|&n| Form {
                    shape: dls_protocol::Shape::square(n),
                    ..form
                })
                .collect()
        }
    };
    let reach = session_workers(workers, require_all)?;
    runtime()?.block_on(async {
        let mut cals = reach
            .with_pool(async |pool, _| {
                let mut cals = Vec::new();
                for f in &forms {
                    eprintln!("calibrating {} worker(s) with products of {f} ...", pool.len());
                    cals.push(reach.calibrate(pool, *f).await?.0);
                }
                Ok(cals)
            })
            .await?;
        let scaling = match cals.len() {
            1 => None,
            _ => Some(calibrate::scaling(&cals)?),
        };
        let Some(cal) = cals.pop() else {
            bail!("internal error: no calibration");
        };
        std::fs::write(output, cal.to_toml_with(scaling.as_deref())?)
            .with_context(|| format!("writing {}", output.display()))?;
        if let Some(s) = &scaling {
            for (w, s) in cal.workers.iter().zip(s) {
                let speeds: Vec<String> = s.speed.iter().map(|(n, v)| format!("{v:.3e} flop/s at {n}")).collect();
                eprintln!(
                    "{}: {:.3e} s/byte out, {:.3e} s/byte back; {}",
                    w.name,
                    s.send_per_byte,
                    s.return_per_byte,
                    speeds.join(", ")
                );
            }
        }
        for w in &cal.workers {
            eprintln!(
                "{}: c = {:.3e} s (R² {:.3}, latency {:.2e} s), w = {:.3e} s (R² {:.3}, latency {:.2e} s), d = {:.3e} s (R² {:.3}, latency {:.2e} s)",
                w.name, w.send.slope, w.send.r2, w.send.intercept, w.compute.slope, w.compute.r2, w.compute.intercept, w.ret.slope, w.ret.r2, w.ret.intercept
            );
            for warn in &w.warnings {
                eprintln!("warning: {}: {warn}", w.name);
            }
        }
        eprintln!("wrote {}", output.display());
        if json {
            println!("{}", serde_json::to_string_pretty(&cal)?);
        }
        Ok(())
    })
}

/// How to reach the workers the flags name: the session API's
/// [`session::Workers`], with its remarks printed on stderr.
fn session_workers(workers: &Workers, require_all: bool) -> Result<session::Workers> {
    let cluster = cluster_of(workers)?;
    let token = token_of(workers.token_file.as_deref(), Some(&cluster))?;
    Ok(session::Workers {
        require_all,
        encrypt: workers.encrypt,
        notes: |s| eprintln!("{s}"),
        ..session::Workers::new(cluster, token)
    })
}

/// `dls status`: every worker asked at once; with `wait`, again every half
/// second until all answer or the time is up.
pub fn status(workers: &Workers, json: bool, wait: Option<f64>) -> Result<()> {
    if let Some(w) = wait {
        if !(w.is_finite() && w >= 0.0) {
            bail!("--wait must be a number of seconds, at least 0");
        }
    }
    let cluster = cluster_of(workers)?;
    let token = token_of(workers.token_file.as_deref(), Some(&cluster))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(wait.unwrap_or(0.0));
    let rows = runtime()?.block_on(async {
        loop {
            let mut set = tokio::task::JoinSet::new();
            for (i, w) in cluster.worker.iter().enumerate() {
                let (name, address, token) = (w.name.clone(), w.address.clone(), token.clone());
                set.spawn(async move {
                    let t = ConnectOptions {
                        connect: std::time::Duration::from_secs(2),
                        ..ConnectOptions::default()
                    };
                    let row = match link::status(&name, &address, token.as_ref(), t).await {
                        Ok(s) => StatusRow::reached(&name, &address, s),
                        Err(e) => StatusRow::unreachable(&name, &address, format!("{e:#}")),
                    };
                    (i, row)
                });
            }
            let mut rows: Vec<(usize, StatusRow)> = set.join_all().await;
            rows.sort_by_key(|r| r.0);
            let rows: Vec<StatusRow> = rows.into_iter().map(|r| r.1).collect();
            if rows.iter().all(|r| r.reachable) || std::time::Instant::now() >= deadline {
                break rows;
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    });
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", crate::output::status::table(&rows));
    }
    let down = rows.iter().filter(|r| !r.reachable).count();
    if down > 0 {
        bail!("{down} of {} worker(s) did not answer", rows.len());
    }
    Ok(())
}

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
            crate::runtime::batch::check_fits(m, &form, false, crate::runtime::batch::available_memory(), &what)?;
            Batch::random_form(form, m, args.seed)
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
        ports: if args.ports == 1 { Ports::One } else { Ports::Two },
        rounding: match args.rounding {
            RoundingArg::Paper => Rounding::Paper,
            RoundingArg::Refined => Rounding::Refined,
        },
        verify: args.verify,
        seed: args.seed,
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

fn progress_bar(len: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len as u64);
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} products returned ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

pub fn run(args: &RunArgs) -> Result<()> {
    let inputs: Vec<PathBuf> = args.input.clone().unwrap_or_default();
    for (path, what) in [
        (&args.output, "--output"),
        (&args.trace, "--trace"),
        (&args.gantt, "--gantt"),
    ] {
        if let Some(p) = path {
            outputs::check_writable(p, what, &inputs)?;
        }
    }
    let reach = session_workers(&args.workers, args.require_all)?;
    let cluster = &reach.cluster;
    let batch = batch_of(args)?;
    if let Some(p) = &args.output {
        // C's values and the .npy header.
        let bytes = batch
            .form
            .out_bytes(1)
            .saturating_mul(batch.count as u64)
            .saturating_add(128);
        outputs::check_space(p, bytes, "--output")?;
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
    // C is written into --output in place as it arrives (renamed to its
    // name once complete), or not kept at all.
    let mut writer = match &args.output {
        Some(p) => Some(crate::output::npy::NpyWriter::create(p, &batch.form, batch.count)?),
        None => None,
    };
    let mut discard = crate::runtime::data::Discard;
    let bar = progress_bar(batch.count);
    let sink: &mut dyn crate::runtime::data::Sink = match writer.as_mut() {
        Some(w) => w,
        None => &mut discard,
    };
    let done = runtime()?.block_on(session::run(
        &reach,
        given,
        model.as_mut().map(|m| &mut m.1),
        &batch,
        &cfg,
        sink,
        |k| bar.inc(k as u64),
    ));
    bar.finish_and_clear();
    let done = done?;
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
    write_outputs(args, &batch, done, writer)
}

/// C, the trace, the chart and the summary of a finished run. Each is
/// written even when an earlier one failed, and the summary always
/// prints; the failures are reported together at the end.
fn write_outputs(
    args: &RunArgs,
    batch: &Batch,
    done: BatchRun,
    writer: Option<crate::output::npy::NpyWriter>,
) -> Result<()> {
    let mut failed: Vec<String> = Vec::new();
    if let Some(w) = writer {
        match w.finish() {
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

pub fn gantt(trace: &Path, output: &Path) -> Result<()> {
    let t = Trace::read(trace)?;
    // What ran, from the trace itself; a trace without it is named by its file.
    let title = t.title.clone().unwrap_or_else(|| {
        trace
            .file_name()
            .map_or_else(|| "trace".to_string(), |f| f.to_string_lossy().into_owned())
    });
    std::fs::write(output, crate::output::gantt::svg(&t, &title))
        .with_context(|| format!("writing {}", output.display()))?;
    eprintln!("wrote {}", output.display());
    Ok(())
}

pub fn demo(config: Option<&Path>, out_dir: &Path, json: bool) -> Result<()> {
    let cfg = match config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            crate::demo::DemoConfig::parse(&text, &p.display().to_string())?
        }
        None => crate::demo::DemoConfig::parse(crate::demo::DEFAULT_CONFIG, "configs/demo.toml (built in)")?,
    };
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let t0 = std::time::Instant::now();
    let rows = runtime()?.block_on(crate::demo::run(&cfg, out_dir, |line| eprintln!("{line}")))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!("\n{}", crate::demo::table(&rows));
        println!(
            "trace: {} (open in https://ui.perfetto.dev), Gantt chart: {}; {:.1} s in all",
            out_dir.join("demo-trace.json").display(),
            out_dir.join("demo-gantt.svg").display(),
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
