//! `dls experiment KIND`: runs one of [`crate::experiments`]'s experiments
//! on emulated local workers or on a cluster, then writes KIND.json,
//! KIND.csv and KIND.svg and prints a table. With `--append` the rows join
//! those already in KIND.json (a test bed is built anew for every platform,
//! so a family of random platforms is many invocations).

use crate::cli::args::{runtime, ExperimentArgs, ExperimentKind};
use crate::config::cluster::Cluster;
use crate::experiments::{self as x, AdaptRow, BaselineRow, Family, HeuristicsRow, LinearityRow, ParticipationRow};
use crate::runtime::batch::Batch;
use crate::session::{self, Workers};
use anyhow::{bail, Context, Result};
use dls_protocol::Token;
use serde::{de::DeserializeOwned, Serialize};
use std::path::Path;

type Groups = Vec<(String, Vec<(String, f64)>)>;

pub fn run(args: &ExperimentArgs) -> Result<()> {
    if args.size == 0 || args.batch == 0 || args.platforms == 0 || args.count == 0 || args.reps == 0 {
        bail!("--size, --batch, --platforms, --count and --reps must be at least 1");
    }
    let remote = match (&args.cluster, &args.workers) {
        (Some(p), _) => Some(Cluster::load(p)?),
        (None, Some(l)) => Some(Cluster::from_list(l)?),
        _ => None,
    };
    let labels = args.family.is_some() || args.speeds.is_some() || args.x.is_some();
    if labels && remote.is_none() && !matches!(args.kind, ExperimentKind::Product) {
        bail!("--family, --speeds and --x label runs on a cluster; give --cluster or --workers");
    }
    // The labels of a cluster's rows; none unless --speeds says.
    let speeds = args
        .speeds
        .as_deref()
        .map(x::parse_speeds)
        .transpose()?
        .unwrap_or_default();
    if let Some(c) = &remote {
        if !speeds.is_empty() && speeds.len() != c.worker.len() {
            bail!(
                "--speeds gives {} workers but the cluster has {}",
                speeds.len(),
                c.worker.len()
            );
        }
    }
    let opts = x::Options {
        size: args.size,
        batch: args.batch,
        seed: args.seed,
        platforms: args.platforms,
        workers: args.count,
        emulation: x::Emulation::default(),
    };
    if args.replot {
        return replot(args);
    }
    let token = crate::cli::args::token_of(args.token_file.as_deref(), remote.as_ref())?;
    let say = |l: &str| eprintln!("{l}");
    runtime()?.block_on(async {
        match args.kind {
            ExperimentKind::Linearity => {
                let rows = match &remote {
                    Some(c) => {
                        Workers::all(c.clone(), token.clone())
                            .with_pool(async |pool, _| x::linearity(pool.links_mut(), opts.size).await)
                            .await?
                    }
                    None => linearity_local(&opts).await?,
                };
                let rows = merged(args, "linearity", rows, |_, _| {})?;
                linearity_outputs(args, &rows)
            }
            ExperimentKind::Heuristics => {
                let rows = heuristics_rows(args, remote.as_ref(), &opts, token.as_ref(), &speeds).await?;
                let rows = merged(args, "heuristics", rows, |_, _| {})?;
                heuristics_outputs(args, &rows)
            }
            ExperimentKind::Baselines => {
                let rows = baselines_rows(remote.as_ref(), &opts, token.as_ref(), &speeds).await?;
                let rows = merged(
                    args,
                    "baselines",
                    rows,
                    |old: &[BaselineRow], new: &mut [BaselineRow]| {
                        let next = old.iter().map(|r| r.platform + 1).max().unwrap_or(0);
                        for r in new {
                            r.platform += next;
                        }
                    },
                )?;
                baselines_outputs(args, &rows)
            }
            ExperimentKind::Adapt => {
                if remote.is_some() {
                    bail!("the adapt experiment changes a worker's speed by emulation; it runs on local workers only (drop --cluster/--workers)");
                }
                let rows = x::adapt_local(&opts, args.reps, say).await?;
                let rows = merged(args, "adapt", rows, |old: &[AdaptRow], new: &mut [AdaptRow]| {
                    let next = old.iter().map(|r| r.platform + 1).max().unwrap_or(0);
                    for r in new {
                        r.platform += next;
                    }
                })?;
                adapt_outputs(args, &rows)
            }
            ExperimentKind::Product => {
                if remote.is_some() {
                    bail!("the product experiment compares emulated stars (the heterogeneous one and its equivalent); it runs on local workers only (drop --cluster/--workers)");
                }
                let rows = product_rows(args, &speeds).await?;
                let rows = merged(args, "product", rows, |_, _| {})?;
                product_outputs(args, &rows)
            }
            ExperimentKind::Participation => {
                let rows = match &remote {
                    Some(c) => {
                        let Some(xv) = args.x else {
                            bail!("on a cluster, say which platform it is with --x (1 or 3 in the report)");
                        };
                        if c.worker.len() != 4 {
                            bail!(
                                "the participation experiment needs the 4 workers P1..P4 in order; the cluster has {}",
                                c.worker.len()
                            );
                        }
                        x::participation_on(c, token.as_ref(), xv, &opts, say).await?
                    }
                    None => x::participation(&opts, say).await?,
                };
                let rows = merged(args, "participation", rows, |_, _| {})?;
                participation_outputs(args, &rows)
            }
        }
    })
}

/// The product assessment on emulated stars: `speeds`, or the paper's.
async fn product_rows(args: &ExperimentArgs, speeds: &[(f64, f64)]) -> Result<Vec<x::ProductRow>> {
    let star = if speeds.is_empty() {
        x::paper_speeds()
    } else {
        speeds.to_vec()
    };
    // Slow enough that the emulated workers' real computing takes about
    // one core of this machine at most.
    let emulation = x::Emulation {
        base_link: 32.0,
        base_slowdown: 1.2 * star.iter().map(|s| s.1).sum::<f64>(),
    };
    x::product_local(args.size, &star, emulation, args.seed, |l| eprintln!("{l}")).await
}

/// Heuristics on the cluster (rows numbered on after those already
/// stored, with --append) or on emulated platforms.
async fn heuristics_rows(
    args: &ExperimentArgs,
    remote: Option<&Cluster>,
    opts: &x::Options,
    token: Option<&Token>,
    speeds: &[(f64, f64)],
) -> Result<Vec<HeuristicsRow>> {
    let Some(c) = remote else {
        return x::heuristics_local(opts, |l| eprintln!("{l}")).await;
    };
    let family = args.family.unwrap_or(Family::Cluster);
    let first = if args.append {
        existing::<HeuristicsRow>(&args.out, "heuristics")?
            .iter()
            .filter(|r| r.family == family)
            .map(|r| r.platform + 1)
            .max()
            .unwrap_or(0)
    } else {
        0
    };
    Workers::all(c.clone(), token.cloned())
        .with_pool(async |pool, _| x::heuristics_cluster(pool, opts, family, speeds, first).await)
        .await
}

/// Baselines on the cluster or on emulated stars.
async fn baselines_rows(
    remote: Option<&Cluster>,
    opts: &x::Options,
    token: Option<&Token>,
    speeds: &[(f64, f64)],
) -> Result<Vec<BaselineRow>> {
    let Some(cl) = remote else {
        return x::baselines_local(opts, |l| eprintln!("{l}")).await;
    };
    let batch = Batch::random(opts.batch, opts.size, opts.seed);
    Workers::all(cl.clone(), token.cloned())
        .with_pool(async |pool, _| {
            let platform = x::calibrated(pool, opts.size).await?;
            x::baselines_on(pool, &platform, &batch, 0, speeds).await
        })
        .await
}

/// `--replot`: the outputs again from the stored rows.
fn replot(args: &ExperimentArgs) -> Result<()> {
    fn stored<T: DeserializeOwned>(args: &ExperimentArgs, kind: &str) -> Result<Vec<T>> {
        let rows = existing::<T>(&args.out, kind)?;
        if rows.is_empty() {
            bail!(
                "--replot: no rows in {}",
                args.out.join(format!("{kind}.json")).display()
            );
        }
        Ok(rows)
    }
    match args.kind {
        ExperimentKind::Linearity => linearity_outputs(args, &stored(args, "linearity")?),
        ExperimentKind::Heuristics => heuristics_outputs(args, &stored(args, "heuristics")?),
        ExperimentKind::Baselines => baselines_outputs(args, &stored(args, "baselines")?),
        ExperimentKind::Participation => participation_outputs(args, &stored(args, "participation")?),
        ExperimentKind::Adapt => adapt_outputs(args, &stored(args, "adapt")?),
        ExperimentKind::Product => product_outputs(args, &stored(args, "product")?),
    }
}

/// Rows already in `dir/KIND.json` (none if there is no such file).
fn existing<T: DeserializeOwned>(dir: &Path, kind: &str) -> Result<Vec<T>> {
    let path = dir.join(format!("{kind}.json"));
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("--append: {} does not hold {kind} rows", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// With `--append`, the old rows followed by the new ones (which `renumber`
/// may adjust, seeing the old); else the new rows.
fn merged<T: DeserializeOwned>(
    args: &ExperimentArgs,
    kind: &str,
    mut rows: Vec<T>,
    renumber: impl FnOnce(&[T], &mut [T]),
) -> Result<Vec<T>> {
    if !args.append {
        return Ok(rows);
    }
    let mut all = existing::<T>(&args.out, kind)?;
    renumber(&all, &mut rows);
    all.extend(rows);
    Ok(all)
}

async fn linearity_local(opts: &x::Options) -> Result<Vec<LinearityRow>> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(opts.seed);
    let specs: Vec<_> = (0..opts.workers)
        .map(|i| {
            let (c, w) = (rng.random_range(1..=10) as f64, rng.random_range(1..=10) as f64);
            opts.emulation.worker(format!("w{i}"), c, w)
        })
        .collect();
    let workers = crate::runtime::local::start(&specs).await?;
    session::on_local(workers, async |pool| x::linearity(pool.links_mut(), opts.size).await).await
}

fn write_outputs<T: Serialize>(dir: &Path, kind: &str, rows: &[T], csv: String, svg: String) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = dir.join(format!("{kind}.json"));
    std::fs::write(&json, serde_json::to_string_pretty(rows)?)
        .with_context(|| format!("writing {}", json.display()))?;
    std::fs::write(dir.join(format!("{kind}.csv")), csv).with_context(|| format!("writing {kind}.csv"))?;
    std::fs::write(dir.join(format!("{kind}.svg")), svg).with_context(|| format!("writing {kind}.svg"))?;
    eprintln!("wrote {kind}.json, {kind}.csv and {kind}.svg in {}", dir.display());
    Ok(())
}

/// Prints `rows` as JSON with `--json`, else `table`.
fn print<T: Serialize>(args: &ExperimentArgs, rows: &T, table: String) -> Result<()> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(rows)?);
    } else {
        print!("{table}");
    }
    Ok(())
}

/// Bar groups: one per distinct key, in order of first appearance, holding
/// the bars of every item with that key.
/// A CSV document: the header line, then one line per row.
fn csv_of<T>(header: &str, rows: &[T], fields: impl Fn(&T) -> Vec<String>) -> String {
    let mut csv = format!("{header}\n");
    for r in rows {
        csv.push_str(&fields(r).join(","));
        csv.push('\n');
    }
    csv
}

fn grouped<T, K: PartialEq>(
    items: &[T],
    key: impl Fn(&T) -> K,
    label: impl Fn(&K) -> String,
    bars: impl Fn(&T) -> Vec<(String, f64)>,
) -> Groups {
    let mut keys: Vec<K> = Vec::new();
    for it in items {
        let k = key(it);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.iter()
        .map(|k| {
            let per = items.iter().filter(|it| key(it) == *k).flat_map(&bars).collect();
            (label(k), per)
        })
        .collect()
}

fn linearity_outputs(args: &ExperimentArgs, rows: &[LinearityRow]) -> Result<()> {
    let csv = csv_of("worker,units,send,compute,return", rows, |r| {
        vec![
            r.worker.to_string(),
            r.units.to_string(),
            r.send.to_string(),
            r.compute.to_string(),
            r.ret.to_string(),
        ]
    });
    let groups = grouped(
        rows,
        |r| r.worker.clone(),
        |w| w.clone(),
        |r| vec![(format!("{} units", r.units), r.send * 1e3)],
    );
    let svg = x::bars(
        "Linearity: send time against message size (Figure 8)",
        "send time (ms)",
        0.0,
        &groups,
    );
    write_outputs(&args.out, "linearity", rows, csv, svg)?;
    print(args, &rows, x::linearity_table(rows))
}

fn heuristics_outputs(args: &ExperimentArgs, rows: &[HeuristicsRow]) -> Result<()> {
    let summary = x::summarise(rows);
    let csv = csv_of(
        "family,platform,speeds,strategy,predicted,measured,inc_c_predicted",
        rows,
        |r| {
            vec![
                r.family.name().to_string(),
                r.platform.to_string(),
                x::speeds_label(&r.speeds),
                r.strategy.to_string(),
                r.predicted.to_string(),
                r.measured.to_string(),
                r.inc_c_predicted.to_string(),
            ]
        },
    );
    let groups = grouped(
        &summary,
        |s| s.family.clone(),
        |f| f.clone(),
        |s| {
            vec![
                (format!("{} predicted", s.strategy), s.predicted_mean),
                (format!("{} measured", s.strategy), s.measured_mean),
            ]
        },
    );
    let svg = x::bars(
        "Heuristics, normalised by INC_C's prediction (Figures 10-12; axis from 0.9)",
        "makespan / INC_C predicted",
        0.9,
        &groups,
    );
    write_outputs(&args.out, "heuristics", rows, csv, svg)?;
    print(args, &summary, x::heuristics_table(&summary))
}

fn baselines_outputs(args: &ExperimentArgs, rows: &[BaselineRow]) -> Result<()> {
    let csv = csv_of(
        "platform,speeds,method,predicted,measured,vs_plan,vs_bound",
        rows,
        |r| {
            vec![
                r.platform.to_string(),
                x::speeds_label(&r.speeds),
                r.method.to_string(),
                r.predicted.to_string(),
                r.measured.to_string(),
                r.vs_plan.to_string(),
                r.vs_bound.to_string(),
            ]
        },
    );
    // Against the bound when the rows have it (older rows do not).
    let with_bound = rows.iter().any(|r| r.vs_bound.is_finite());
    let groups = grouped(
        rows,
        |r| r.platform,
        |k| format!("platform {k}"),
        |r| vec![(r.method.clone(), if with_bound { r.vs_bound } else { r.vs_plan })],
    );
    let svg = if with_bound {
        crate::output::svg::bars_with(
            "Baselines: measured makespan / steady-state bound",
            "makespan / bound",
            0.0,
            &groups,
            Some((1.0, "steady-state bound")),
        )
    } else {
        x::bars(
            "Baselines: measured makespan / the plan's",
            "makespan / plan's",
            0.0,
            &groups,
        )
    };
    write_outputs(&args.out, "baselines", rows, csv, svg)?;
    print(args, &rows, x::baselines_table(rows))
}

fn adapt_outputs(args: &ExperimentArgs, rows: &[AdaptRow]) -> Result<()> {
    let csv = csv_of(
        "platform,speeds,slowed,after,factor,method,rep,predicted,measured,corrections",
        rows,
        |r| {
            vec![
                r.platform.to_string(),
                x::speeds_label(&r.speeds),
                r.slowed.clone(),
                r.after.to_string(),
                r.factor.to_string(),
                r.method.clone(),
                r.rep.to_string(),
                r.predicted.to_string(),
                r.measured.to_string(),
                r.corrections.to_string(),
            ]
        },
    );
    let groups: Groups = x::adapt_summary(rows)
        .into_iter()
        .map(|(k, a, n)| {
            let label = format!("platform {k}");
            (
                label,
                vec![("correction".to_string(), a), ("--no-adapt".to_string(), n)],
            )
        })
        .collect();
    let svg = x::bars(
        "rounds, a worker slowed 3x halfway: median makespan with and without correction",
        "makespan (s)",
        0.0,
        &groups,
    );
    write_outputs(&args.out, "adapt", rows, csv, svg)?;
    print(args, &rows, x::adapt_table(rows))
}

fn product_outputs(args: &ExperimentArgs, rows: &[x::ProductRow]) -> Result<()> {
    let csv = csv_of(
        "n,star,distribution,speeds,enrolled,measured,predicted,bound,partition_over_lower",
        rows,
        |r| {
            vec![
                r.n.to_string(),
                r.star.clone(),
                r.distribution.clone(),
                r.speeds.clone(),
                r.enrolled.to_string(),
                r.measured.to_string(),
                r.predicted.to_string(),
                r.bound.to_string(),
                r.partition_over_lower.to_string(),
            ]
        },
    );
    let groups: Groups = grouped(
        rows,
        |r| r.n,
        |n| format!("n = {n}"),
        |r| vec![(format!("{} on {}", r.distribution, r.star), r.measured)],
    );
    let svg = x::bars(
        "one product: heterogeneous and homogeneous distributions, measured makespan",
        "makespan (s)",
        0.0,
        &groups,
    );
    write_outputs(&args.out, "product", rows, csv, svg)?;
    print(args, &rows, x::product_table(rows))
}

fn participation_outputs(args: &ExperimentArgs, rows: &[ParticipationRow]) -> Result<()> {
    let csv = csv_of("x,allowed,enrolled,predicted,measured", rows, |r| {
        vec![
            r.x.to_string(),
            r.allowed.to_string(),
            r.enrolled.join(" ").to_string(),
            r.predicted.to_string(),
            r.measured.to_string(),
        ]
    });
    let groups = grouped(
        rows,
        |r| (r.x, r.allowed),
        |(x, allowed)| format!("x={x} allow {allowed}"),
        |r| {
            vec![
                ("predicted".to_string(), r.predicted),
                ("measured".to_string(), r.measured),
            ]
        },
    );
    let svg = x::bars(
        "Participation (Figure 14): makespan with 1 to 4 workers allowed",
        "makespan (s)",
        0.0,
        &groups,
    );
    write_outputs(&args.out, "participation", rows, csv, svg)?;
    print(args, &rows, x::participation_table(rows))
}
