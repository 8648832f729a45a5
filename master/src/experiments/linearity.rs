//! Time against message size for every worker (the report's Figure 8).

use super::calibrate_opts;
use crate::runtime::calibrate;
use crate::runtime::link::Link;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinearityRow {
    pub worker: String,
    pub units: u64,
    pub send: f64,
    pub compute: f64,
    #[serde(rename = "return")]
    pub ret: f64,
}

pub async fn linearity(links: &mut [Link], size: usize) -> Result<Vec<LinearityRow>> {
    let cal = calibrate::calibrate(links, &calibrate_opts(size)).await?;
    Ok(cal
        .workers
        .iter()
        .flat_map(|w| {
            w.samples.iter().map(|s| LinearityRow {
                worker: w.name.clone(),
                units: s.0,
                send: s.1,
                compute: s.2,
                ret: s.3,
            })
        })
        .collect())
}

pub fn linearity_table(rows: &[LinearityRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<8} {:>6} {:>12} {:>12} {:>12}",
        "worker", "units", "send s", "compute s", "return s"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<8} {:>6} {:>12.6} {:>12.6} {:>12.6}",
            r.worker, r.units, r.send, r.compute, r.ret
        );
    }
    s
}
