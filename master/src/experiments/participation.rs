//! Section 5.3.4 of the report: which workers take part as a link speeds up.

use super::{calibrated, run_all, Emulation, Options};
use crate::output::table::{Col, Table};
use crate::runtime::batch::Batch;
use crate::runtime::local::{self, Emulated};
use crate::session::Workers;
use anyhow::Result;
use dls_lp::{Platform, Strategy};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ParticipationRow {
    pub x: f64,
    /// Workers the planner may use (the first `allowed` of P1..P4).
    pub allowed: usize,
    pub enrolled: Vec<String>,
    pub predicted: f64,
    pub measured: f64,
}

/// Communication of a unit at speed 1, over its computation at speed 1, in
/// the participation experiment. The report's set-up says a tenth; on that
/// platform P4 (x = 1) joins the plan once the ratio falls below about 0.09
/// (`dls plan` on the model platform), so at 0.1 a few percent of
/// measurement noise decide. 0.15 keeps the report's outcome (P4 out for
/// x = 1, in for x = 3) clear of the boundary.
pub const PARTICIPATION_COMM_RATIO: f64 = 0.15;

/// Section 5.3.4's speeds: communication 10, 8, 8, x; computation 9, 9, 10, 1.
pub fn participation_speeds(x: f64) -> Vec<(f64, f64)> {
    vec![(10.0, 9.0), (8.0, 9.0), (8.0, 10.0), (x, 1.0)]
}

/// Section 5.3.4: communication speeds 10, 8, 8, x and computation speeds
/// 9, 9, 10, 1, with x = 1 and x = 3, allowing 1 to 4 workers (FIFO).
/// The emulated computing is tuned to this machine's kernel so that the
/// communication/computation ratio is `PARTICIPATION_COMM_RATIO`.
pub async fn participation(opts: &Options, mut say: impl FnMut(&str)) -> Result<Vec<ParticipationRow>> {
    let form = dls_protocol::Form::square(opts.size as u32);
    // The workers' waits multiply this very measurement, so the ratio is
    // the one asked for, not one blurred by two measurements' noise.
    let (reference, t_ref) = local::measured_reference(opts.size)?;
    let unit_bytes = form.in_bytes(1) as f64;
    let c_base = unit_bytes / (opts.emulation.base_link * 1e6);
    let emulation = Emulation {
        base_slowdown: (c_base / PARTICIPATION_COMM_RATIO / t_ref).max(1.0),
        ..opts.emulation
    };
    let mut rows = Vec::new();
    for x in [1.0, 3.0] {
        let specs: Vec<Emulated> = participation_speeds(x)
            .iter()
            .enumerate()
            .map(|(i, &(c, w))| emulation.worker(format!("P{}", i + 1), c, w))
            .collect();
        let workers = local::start_sharing(&specs, reference.clone()).await?;
        let result = participation_on(&workers.cluster, None, x, opts, &mut say).await;
        workers.stop().await;
        rows.extend(result?);
        say(&format!("x = {x} done"));
    }
    Ok(rows)
}

/// The participation runs on running workers P1..P4 (in that order; a test
/// bed built from `participation_speeds(x)`, or any four): calibrate all
/// four once, then plan and run with the first 1, 2, 3 and 4 allowed.
pub async fn participation_on(
    cluster: &crate::config::cluster::Cluster,
    token: Option<&dls_protocol::Token>,
    x: f64,
    opts: &Options,
    mut say: impl FnMut(&str),
) -> Result<Vec<ParticipationRow>> {
    let batch = Batch::random(opts.batch, opts.size, opts.seed);
    let full = Workers::all(cluster.clone(), token.cloned())
        .with_pool(async |pool, _| calibrated(pool, opts.size).await)
        .await?;
    let costs: Vec<String> = full
        .workers()
        .iter()
        .map(|w| format!("{} c {:.2e} w {:.2e} d {:.2e}", w.name, w.c, w.w, w.d))
        .collect();
    say(&format!("x = {x}: calibrated {}", costs.join("; ")));
    let mut out = Vec::new();
    for allowed in 1..=cluster.worker.len() {
        let first = crate::config::cluster::Cluster {
            worker: cluster.worker[..allowed].to_vec(),
            ..cluster.clone()
        };
        let platform = Platform::new(full.workers()[..allowed].to_vec())?;
        let r = Workers::all(first, token.cloned())
            .with_pool(async |pool, _| run_all(pool, &platform, &batch, &[Strategy::Fifo]).await)
            .await?
            .remove(0);
        out.push(ParticipationRow {
            x,
            allowed,
            enrolled: r.send_order.clone(),
            predicted: r.predicted_makespan,
            measured: r.measured_makespan,
        });
    }
    Ok(out)
}

pub fn participation_table(rows: &[ParticipationRow]) -> String {
    let mut t = Table::new(&[
        ("x", Col::Right(3)),
        ("allowed", Col::Right(8)),
        ("predicted", Col::Right(11)),
        ("measured", Col::Right(11)),
        ("enrolled", Col::Tail),
    ]);
    for r in rows {
        t.row([
            r.x.to_string(),
            r.allowed.to_string(),
            format!("{:.4}s", r.predicted),
            format!("{:.4}s", r.measured),
            r.enrolled.join(" "),
        ]);
    }
    t.text()
}
