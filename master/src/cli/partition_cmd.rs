//! `dls partition`: split N equal elements over processors described by
//! speeds (constant or measured points) and optional bounds, without
//! communication (see `dls_lp::partition`).
//!
//! ```toml
//! [[processor]]
//! name = "a"
//! speed = 120.0                          # elements per second
//!
//! [[processor]]
//! name = "b"
//! points = [[100, 80.0], [1000, 95.0], [5000, 40.0]]   # (elements, speed)
//! max_elements = 3000
//! ```

use anyhow::{bail, Context, Result};
use dls_lp::partition::{self, Cost, Processor, Speed};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    #[serde(default)]
    speed: Option<f64>,
    #[serde(default)]
    points: Option<Vec<[f64; 2]>>,
    #[serde(default)]
    max_elements: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpeedsFile {
    #[serde(default)]
    processor: Vec<Entry>,
}

/// Parse a speeds file into processors.
pub fn parse(text: &str, origin: &str) -> Result<Vec<Processor>> {
    let f: SpeedsFile = toml::from_str(text).with_context(|| format!("{origin}: not a valid speeds file"))?;
    if f.processor.is_empty() {
        bail!("{origin}: no [[processor]] table");
    }
    let mut seen = std::collections::HashSet::new();
    f.processor
        .into_iter()
        .map(|e| {
            if !seen.insert(e.name.clone()) {
                bail!("{origin}: processor name {:?} is used twice", e.name);
            }
            let speed = match (e.speed, e.points) {
                (Some(s), None) => Speed::Constant(s),
                (None, Some(p)) => Speed::Points(p.into_iter().map(|[x, s]| (x, s)).collect()),
                _ => bail!(
                    "{origin}: processor {:?}: give exactly one of `speed` or `points`",
                    e.name
                ),
            };
            speed.validate(&e.name).with_context(|| origin.to_string())?;
            Ok(Processor {
                name: e.name,
                speed,
                max_elements: e.max_elements,
            })
        })
        .collect()
}

#[derive(Debug, Serialize)]
pub struct Share {
    pub name: String,
    pub elements: u64,
}

#[derive(Debug, Serialize)]
pub struct PartitionJson {
    pub allocation: Vec<Share>,
    /// The largest per-processor time: max n_i / s_i(n_i), or max f(n_i) / k_i.
    pub time: f64,
    pub model: String,
}

pub fn run(speeds: &Path, elements: u64, cost: Option<&str>, json: bool) -> Result<()> {
    let text = std::fs::read_to_string(speeds).with_context(|| format!("reading speeds file {}", speeds.display()))?;
    let procs = parse(&text, &speeds.display().to_string())?;
    if elements == 0 {
        bail!("--elements must be at least 1");
    }
    let (alloc, model) = match cost {
        None => (
            partition::fpm(&procs, elements)?,
            "functional performance model".to_string(),
        ),
        Some(c) => {
            let cost = match c {
                "linear" => Cost::Linear,
                "nlogn" => Cost::NLogN,
                "n2" => Cost::Square,
                other => bail!("unknown --cost {other:?}: expected linear, nlogn or n2"),
            };
            let k = procs
                .iter()
                .map(|p| match p.speed {
                    Speed::Constant(s) => Ok(s),
                    Speed::Points(_) => bail!(
                        "processor {:?} has speed points; --cost models a constant relative speed per processor (give `speed`)",
                        p.name
                    ),
                })
                .collect::<Result<Vec<_>>>()?;
            let bounds: Vec<Option<u64>> = procs.iter().map(|p| p.max_elements).collect();
            (
                partition::related(&k, &bounds, &cost, elements)?,
                format!("cost {c}, related speeds"),
            )
        }
    };
    let out = PartitionJson {
        allocation: procs
            .iter()
            .zip(&alloc.elements)
            .map(|(p, &e)| Share {
                name: p.name.clone(),
                elements: e,
            })
            .collect(),
        time: alloc.time,
        model,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let mut s = String::new();
        let _ = writeln!(s, "{} elements, {}: time {:.6} s", elements, out.model, out.time);
        for sh in &out.allocation {
            let _ = writeln!(s, "{:<16} {:>10}", sh.name, sh.elements);
        }
        print!("{s}");
    }
    Ok(())
}
