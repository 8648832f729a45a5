//! What each `dls` subcommand does beyond parsing its flags.

use crate::cli::args::{cluster_of, runtime, RoundingArg, RunArgs, Workers};
use crate::config::platform_file::PlatformFile;
use crate::output::trace::Trace;
use crate::runtime::batch::Batch;
use crate::runtime::calibrate::{self, CalibrateOptions};
use crate::runtime::link::{self, Timeouts};
use crate::runtime::pool::Pool;
use crate::runtime::session::{self, RunConfig};
use crate::runtime::shell::RunOptions;
use anyhow::{bail, Context, Result};
use dls_lp::{Ports, Rounding};
use std::io::IsTerminal;
use std::path::Path;

pub fn calibrate(workers: &Workers, size: usize, output: &Path, json: bool) -> Result<()> {
    if size == 0 {
        bail!("--size must be at least 1");
    }
    let cluster = cluster_of(workers)?;
    let token = link::load_token(workers.token_file.as_deref())?;
    runtime()?.block_on(async {
        let mut pool = Pool::connect(&cluster, token.as_ref(), Timeouts::default()).await?;
        eprintln!("calibrating {} worker(s) with {size}×{size} matrices ...", pool.len());
        let cal = calibrate::calibrate(pool.links_mut(), &CalibrateOptions::new(size)).await;
        pool.close().await;
        let cal = cal?;
        std::fs::write(output, cal.to_toml()?).with_context(|| format!("writing {}", output.display()))?;
        for w in &cal.workers {
            eprintln!(
                "{}: c = {:.3e} s (R² {:.3}, latency {:.2e} s), w = {:.3e} s (R² {:.3}), d = {:.3e} s (R² {:.3}, latency {:.2e} s)",
                w.name, w.send.slope, w.send.r2, w.send.intercept, w.compute.slope, w.compute.r2, w.ret.slope, w.ret.r2, w.ret.intercept
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

fn batch_of(args: &RunArgs) -> Result<Batch> {
    if args.batch == Some(0) {
        bail!("--batch 0: a batch needs at least one product");
    }
    if args.size == Some(0) {
        bail!("--size must be at least 1");
    }
    match &args.input {
        Some(files) => {
            let b = Batch::from_npy(&files[0], &files[1], args.size)?;
            if let Some(m) = args.batch {
                if m != b.m {
                    bail!(
                        "--batch {m} disagrees with {}, which holds {} matrices",
                        files[0].display(),
                        b.m
                    );
                }
            }
            if b.m == 0 {
                bail!(
                    "{} holds no matrix: a batch needs at least one product",
                    files[0].display()
                );
            }
            Ok(b)
        }
        None => {
            let (Some(m), Some(n)) = (args.batch, args.size) else {
                bail!("give --batch M and --size n (or --input A.npy B.npy)");
            };
            Ok(Batch::random(m, n, args.seed))
        }
    }
}

pub fn run(args: &RunArgs) -> Result<()> {
    let cluster = cluster_of(&args.workers)?;
    let token = link::load_token(args.workers.token_file.as_deref())?;
    let batch = batch_of(args)?;
    let given = match &args.platform {
        Some(p) => Some(PlatformFile::load(p)?),
        None => cluster.known_platform().transpose()?,
    };
    let cfg = RunConfig {
        strategy: args.strategy.into(),
        ports: if args.ports == 1 { Ports::One } else { Ports::Two },
        rounding: match args.rounding {
            RoundingArg::Paper => Rounding::Paper,
            RoundingArg::Refined => Rounding::Refined,
        },
        verify: args.verify,
        seed: args.seed,
        options: RunOptions {
            max_chunk_bytes: args.chunk_mb.max(1) << 20,
            straggler: args.straggler,
            ..RunOptions::default()
        },
    };
    if let Some(f) = args.straggler {
        if !(f.is_finite() && f >= 1.0) {
            bail!("--straggler must be a factor of at least 1 (got {f})");
        }
    }
    let model_path = match (&args.model, &args.workers.cluster) {
        (Some(m), _) => Some(m.clone()),
        (None, Some(c)) if args.learn => Some(std::path::PathBuf::from(format!(
            "{}.model-{}.json",
            c.display(),
            batch.n
        ))),
        (None, None) if args.learn => bail!("with --workers, give --model FILE to learn into"),
        _ => None,
    };
    let mut model = match &model_path {
        Some(p) => match crate::config::learn::Model::load(p)? {
            Some(m) if m.size != batch.n => {
                bail!(
                    "{} holds costs for matrices of size {}, not {}",
                    p.display(),
                    m.size,
                    batch.n
                )
            }
            Some(m) => Some(m),
            None => Some(crate::config::learn::Model::new(batch.n)),
        },
        None => None,
    };
    let names: Vec<String> = cluster.worker.iter().map(|w| w.name.clone()).collect();
    runtime()?.block_on(async {
        let mut pool = Pool::connect(&cluster, token.as_ref(), Timeouts::default()).await?;
        let learned_all = model.as_ref().is_some_and(|m| m.covers(&names));
        let platform = match given {
            Some(p) => p,
            None if learned_all => {
                let blank = names
                    .iter()
                    .map(|n| dls_lp::Worker::new(n.clone(), 1.0, 1.0, 1.0))
                    .collect();
                dls_lp::Platform::new(blank)?
            }
            None => {
                eprintln!("calibrating {} worker(s) (no --platform given) ...", pool.len());
                let cal = calibrate::calibrate(pool.links_mut(), &CalibrateOptions::new(batch.n)).await;
                if cal.is_err() {
                    pool.close().await;
                }
                let cal = cal?;
                for w in &cal.workers {
                    for warn in &w.warnings {
                        eprintln!("warning: {}: {warn}", w.name);
                    }
                }
                cal.platform()?
            }
        };
        let platform = match &model {
            Some(m) if m.batches > 0 => {
                eprintln!("planning with costs learned from {} earlier batch(es)", m.batches);
                m.refine(&platform)?
            }
            _ => platform,
        };
        let bar = indicatif::ProgressBar::new(batch.m as u64);
        if !std::io::stderr().is_terminal() {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} products returned ({elapsed})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let done = session::run_batch(&mut pool, &platform, &batch, &cfg, 1, |k| bar.inc(k as u64)).await;
        bar.finish_and_clear();
        pool.close().await;
        let done = done?;
        if let (Some(m), Some(p)) = (model.as_mut(), &model_path) {
            m.observe(&done.report)?;
            m.save(p)?;
            eprintln!("learned from this batch: {} ({} batch(es))", p.display(), m.batches);
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
        if let Some(path) = &args.output {
            let mats = crate::output::npy::Matrices {
                m: batch.m,
                n: batch.n,
                data: done.outcome.c,
            };
            crate::output::npy::write(path, &mats)?;
            eprintln!("wrote C to {}", path.display());
        }
        if let Some(path) = &args.trace {
            done.trace.write(path)?;
            eprintln!("wrote trace to {} (open it in https://ui.perfetto.dev)", path.display());
        }
        if let Some(path) = &args.gantt {
            let title = format!(
                "{} products of {}×{}, {}",
                batch.m, batch.n, batch.n, done.plan.strategy
            );
            std::fs::write(path, crate::output::gantt::svg(&done.trace, &title))
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote Gantt chart to {}", path.display());
        }
        if args.json {
            println!("{}", serde_json::to_string_pretty(&done.report)?);
        } else {
            print!("{}", done.report.table());
        }
        Ok(())
    })
}

pub fn gantt(trace: &Path, output: &Path) -> Result<()> {
    let t = Trace::read(trace)?;
    let title = trace
        .file_name()
        .map_or_else(|| "trace".to_string(), |f| f.to_string_lossy().into_owned());
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
