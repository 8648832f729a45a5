//! What each `dls` subcommand does beyond parsing its flags.

use crate::cli::args::{cluster_of, runtime, token_of, Products, Workers};
use crate::output::status::StatusRow;
use crate::output::trace::Trace;
use crate::runtime::calibrate;
use crate::runtime::link::{self, ConnectOptions};
use crate::session;
use anyhow::{bail, Context, Result};
use dls_protocol::Form;
use std::path::Path;

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
                    cals.push(reach.calibrate(pool, *f, false).await?.0);
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
        match &cal.ports {
            Some(p) => eprintln!(
                "ports: {} (overlap of a send and a return {:.2}; {} transfers at once: {:.2}x the fastest link out, {:.2}x back)",
                p.model, p.overlap, p.group, p.send_gain, p.return_gain
            ),
            None => eprintln!("ports: one port (not measured: it takes two workers)"),
        }
        for w in &cal.workers {
            if let Some(f) = w.under_load {
                eprintln!(
                    "{}: under load (receiving, computing and returning at once): {} its costs alone",
                    w.name,
                    calibrate::factors_under_load(f)
                );
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
pub(crate) fn session_workers(workers: &Workers, require_all: bool) -> Result<session::Workers> {
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
