//! `dls status`: what each worker said about itself, as a table or JSON.

use crate::output::table::{Col, Table};
use crate::runtime::batch::human_bytes;
use dls_protocol::WorkerStatus;
use serde::Serialize;

/// One worker's line of `dls status`.
#[derive(Debug, Clone, Serialize)]
pub struct StatusRow {
    pub name: String,
    pub address: String,
    pub reachable: bool,
    /// Why not, when unreachable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusFields>,
}

/// What a reachable worker said.
#[derive(Debug, Clone, Serialize)]
pub struct StatusFields {
    pub protocol: u32,
    pub busy: bool,
    /// The master it serves, and for how long.
    pub busy_with: Option<String>,
    pub busy_secs: Option<f64>,
    pub cores: u32,
    pub threads: u32,
    pub memory_limit: u64,
    pub kernel: String,
    pub emulated: bool,
    pub encrypt_required: bool,
    pub uptime_secs: f64,
    pub sessions: u64,
    pub products: u64,
}

impl StatusRow {
    pub fn reached(name: &str, address: &str, s: WorkerStatus) -> StatusRow {
        StatusRow {
            name: name.into(),
            address: address.into(),
            reachable: true,
            error: None,
            status: Some(StatusFields {
                protocol: dls_protocol::PROTOCOL_VERSION,
                busy: s.busy_with.is_some(),
                busy_secs: s.busy_with.as_ref().map(|b| b.1),
                busy_with: s.busy_with.map(|b| b.0),
                cores: s.caps.cores,
                threads: s.caps.threads,
                memory_limit: s.caps.memory_limit,
                kernel: s.caps.kernel,
                emulated: s.caps.emulated,
                encrypt_required: s.encrypt_required,
                uptime_secs: s.uptime_secs,
                sessions: s.sessions,
                products: s.products,
            }),
        }
    }

    pub fn unreachable(name: &str, address: &str, why: String) -> StatusRow {
        StatusRow {
            name: name.into(),
            address: address.into(),
            reachable: false,
            error: Some(why),
            status: None,
        }
    }
}

/// The table `dls status` prints.
pub fn table(rows: &[StatusRow]) -> String {
    let mut t = Table::new(&[
        ("worker", Col::Left(10)),
        ("address", Col::Left(21)),
        ("state", Col::Left(30)),
        ("cores", Col::Right(5)),
        ("threads", Col::Right(7)),
        ("memory", Col::Right(9)),
        ("uptime", Col::Right(9)),
        ("products", Col::Right(9)),
        ("kernel", Col::Tail),
    ]);
    for r in rows {
        let Some(s) = &r.status else {
            let why = r.error.clone().unwrap_or_default();
            t.row([r.name.clone(), r.address.clone(), format!("UNREACHABLE: {why}")]);
            continue;
        };
        let state = match (&s.busy_with, s.busy_secs) {
            (Some(m), Some(secs)) => format!("busy: {m} for {secs:.0} s"),
            _ => "free".to_string(),
        };
        let kernel = format!(
            "{}{}{}",
            s.kernel,
            if s.emulated { " (emulated)" } else { "" },
            if s.encrypt_required { " (--encrypt)" } else { "" }
        );
        t.row([
            r.name.clone(),
            r.address.clone(),
            state,
            s.cores.to_string(),
            s.threads.to_string(),
            human_bytes(s.memory_limit),
            format!("{:.0} s", s.uptime_secs),
            s.products.to_string(),
            kernel,
        ]);
    }
    t.text()
}
