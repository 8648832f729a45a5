//! Worker daemons started inside this process on loopback, made unequal by
//! emulation (`dls demo`, `dls experiment --local`).

use crate::config::cluster::{Cluster, WorkerSpec};
use anyhow::{Context, Result};
use dls_worker::server::Reference;
use std::sync::Arc;

/// One emulated worker: its name, link rate (MB/s each way, `None` for the
/// loopback's own speed) and compute slowdown (≥ 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Emulated {
    pub name: String,
    pub link_rate: Option<f64>,
    pub slowdown: f64,
    /// A change of speed partway through each batch, if any.
    pub speed_change: Option<dls_worker::server::SpeedChange>,
    /// Its memory limit in bytes (2 GiB if none).
    pub memory: Option<u64>,
}

/// The master's uplink in front of every emulated worker, as behind a
/// switch: its rate in MB/s (each way when full duplex, both ways together
/// when not).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmulatedUplink {
    pub rate: f64,
    pub duplex: bool,
}

/// Running daemons; `stop` ends them.
pub struct LocalWorkers {
    pub cluster: Cluster,
    stop: tokio::sync::watch::Sender<bool>,
    handles: Vec<tokio::task::JoinHandle<std::io::Result<()>>>,
}

/// Start one daemon per spec on 127.0.0.1 (one kernel thread each).
pub async fn start(specs: &[Emulated]) -> Result<LocalWorkers> {
    start_sharing(specs, Arc::new(Reference::default())).await
}

/// As `start`, for square products of `size`: the one-product time that
/// every slowdown multiplies is measured here, before any daemon runs,
/// rather than by the first daemon to compute, on cores the others keep
/// busy (which made every emulated worker up to 1.6× slower than asked,
/// and by a different amount each run).
pub async fn start_measured(specs: &[Emulated], size: usize) -> Result<LocalWorkers> {
    let (reference, _) = measured_reference(size)?;
    start_sharing(specs, reference).await
}

/// A reference holding this machine's time for one square product of
/// `size` (one kernel thread, as the daemons here compute), and that time.
pub fn measured_reference(size: usize) -> Result<(Arc<Reference>, f64)> {
    let reference = Arc::new(Reference::default());
    let kernel = dls_worker::kernel::Kernel::new(1).map_err(anyhow::Error::msg)?;
    let t = reference.seconds_per_product(&kernel, &dls_protocol::Form::square(size as u32));
    Ok((reference, t))
}

/// As `start`, the daemons' emulated slowdowns multiplying `reference`'s
/// one-product times (one measurement for all, so the emulated speeds keep
/// their ratios; a caller that measured it too knows the scale exactly).
pub async fn start_sharing(specs: &[Emulated], reference: Arc<Reference>) -> Result<LocalWorkers> {
    start_behind(specs, reference, None).await
}

/// As `start_sharing`, every daemon's connection behind one emulated
/// `uplink` (if any) besides its own link rate.
pub async fn start_behind(
    specs: &[Emulated],
    reference: Arc<Reference>,
    uplink: Option<EmulatedUplink>,
) -> Result<LocalWorkers> {
    let shared = match uplink {
        None => None,
        Some(u) => Some(
            dls_worker::throttle::SharedUplink::new(u.rate * 1e6, u.duplex)
                .with_context(|| format!("an emulated uplink of {} MB/s", u.rate))?,
        ),
    };
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let mut handles = Vec::new();
    let mut worker = Vec::new();
    for s in specs {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding a loopback port")?;
        let addr = listener.local_addr()?;
        let mut cfg = dls_worker::Config::new(1, s.memory.unwrap_or(2 << 30));
        cfg.link_rate = s.link_rate.map(|r| r * 1e6);
        cfg.uplink = shared.clone();
        cfg.slowdown = s.slowdown;
        cfg.speed_change = s.speed_change;
        cfg.reference = reference.clone();
        let mut rx = stop_rx.clone();
        handles.push(tokio::spawn(dls_worker::serve(listener, cfg, async move {
            let _ = rx.changed().await;
        })));
        worker.push(WorkerSpec {
            name: s.name.clone(),
            address: addr.to_string(),
            c: None,
            w: None,
            d: None,
            max_load: None,
        });
    }
    Ok(LocalWorkers {
        cluster: Cluster {
            token_file: None,
            worker_port: None,
            worker,
        },
        stop,
        handles,
    })
}

impl LocalWorkers {
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for h in self.handles {
            let _ = h.await;
        }
    }
}
