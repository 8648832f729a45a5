//! The async shell around the product machine: it carries out the
//! machine's commands over the links, feeds back what the workers did with
//! the time it happened, checks the size of each piece and puts it in C.
//! It never decides what to send, grant or give up on: the machine does.

use super::link::PanelCmd;
use super::{Blocks, ProductJob};
use crate::runtime::link_task::{Cmd, Ev, Links, Watch, Work};
use crate::runtime::pool::Pool;
use anyhow::{anyhow, bail, Result};
use dls_core::product::{Command, Input, Measured, ProductMachine, Status};
use dls_lp::product::{ProductPlan, ProductWorker};
use dls_protocol::{ChunkId, JobId, Values};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How to watch the workers of a product.
#[derive(Debug, Clone, Copy)]
pub struct ProductOptions {
    /// A worker with work in flight must show a sign of life this often.
    pub liveness: Duration,
    /// How often an otherwise silent worker is sent a heartbeat.
    pub heartbeat: Duration,
    /// Give up when nothing at all happens for this long.
    pub stall_timeout: Duration,
}

impl Default for ProductOptions {
    fn default() -> Self {
        ProductOptions {
            liveness: Duration::from_millis(1500),
            heartbeat: Duration::from_millis(250),
            stall_timeout: Duration::from_secs(120),
        }
    }
}

/// Run `plan` (made with `costs`, indexed like the pool's links): every
/// piece of C checked and stored in `sink`; `on_piece` hears how many
/// elements of C were stored each time a piece is. The links go back to
/// the pool whatever happens.
#[allow(clippy::too_many_arguments)]
pub async fn execute(
    pool: &mut Pool,
    costs: &[ProductWorker],
    plan: &ProductPlan,
    job: Arc<ProductJob>,
    id: JobId,
    opts: &ProductOptions,
    sink: &mut dyn Blocks,
    on_piece: &mut (dyn FnMut(usize) + Send),
) -> Result<Measured> {
    if costs.len() != pool.len() {
        bail!("the plan has {} workers but {} are connected", costs.len(), pool.len());
    }
    let mut machine = ProductMachine::new(costs.to_vec(), plan);
    let watch = Watch {
        liveness: opts.liveness,
        heartbeat: opts.heartbeat,
        // Panels are one frame each; the link sends no chunks.
    };
    let (links, events) = Links::spawn(pool, &Work::Product(job.clone()), id, watch, &[])?;
    let mut shell = Shell {
        links,
        sink,
        job,
        arrived: None,
        on_piece,
    };
    let result = shell.drive(&mut machine, events, opts.stall_timeout).await;
    shell.links.restore(pool).await?;
    result?;
    Ok(machine.finish())
}

struct Shell<'a> {
    links: Links,
    sink: &'a mut dyn Blocks,
    job: Arc<ProductJob>,
    /// The piece just handed to the machine.
    arrived: Option<(ChunkId, Values)>,
    on_piece: &'a mut (dyn FnMut(usize) + Send),
}

impl Shell<'_> {
    async fn drive(
        &mut self,
        machine: &mut ProductMachine,
        mut events: mpsc::Receiver<(usize, Ev)>,
        stall: Duration,
    ) -> Result<()> {
        let t0 = Instant::now();
        // The machine's clock never goes back (events of different links
        // may arrive microseconds out of order).
        let mut last = 0.0f64;
        let mut secs = |t: Instant| {
            last = last.max(t.duration_since(t0).as_secs_f64());
            last
        };
        let mut commands = machine.start(0.0);
        loop {
            for cmd in commands.drain(..) {
                self.carry_out(cmd).await?;
            }
            match machine.status() {
                Status::Done => return Ok(()),
                Status::Failed(why) => bail!("{why}"),
                Status::Running => {}
            }
            let (worker, ev) = tokio::select! {
                e = events.recv() => e.ok_or_else(|| anyhow!("every worker connection ended before the product was done"))?,
                _ = tokio::time::sleep(stall) => bail!("nothing happened for {} s: the product is stalled", stall.as_secs()),
            };
            let (input, at) = match ev {
                Ev::Received(piece, at) => (Input::Received(piece), at),
                Ev::Ready(piece, s, at) => (Input::Ready(piece, s), at),
                Ev::Failed(why) => (Input::Lost(why), Instant::now()),
                Ev::Fatal(why) => bail!(why),
                Ev::Results(piece, payload, at) => {
                    let want = machine.expected(worker, piece).map(|r| r.area());
                    match want {
                        Some(len) if payload.len() == len && payload.dtype() == self.job.dtype() => {
                            self.arrived = Some((piece, payload));
                            (Input::Results(piece), at)
                        }
                        Some(len) => (
                            Input::Lost(format!(
                                "returned {} {} values for piece {} ({len} {} expected)",
                                payload.len(),
                                payload.dtype(),
                                piece.0,
                                self.job.dtype()
                            )),
                            at,
                        ),
                        None => (
                            Input::Lost(format!("returned piece {} it was not granted", piece.0)),
                            at,
                        ),
                    }
                }
            };
            commands = machine.on_event(worker, input, secs(at));
        }
    }

    async fn carry_out(&mut self, cmd: Command) -> Result<()> {
        match cmd {
            Command::Panel {
                worker,
                piece,
                rect,
                ks,
                last,
                reading,
                then,
            } => {
                let reading = Duration::from_secs_f64(reading.clamp(0.0, 1e6));
                let cmd = PanelCmd {
                    piece,
                    rect,
                    ks,
                    last,
                    reading,
                    then,
                };
                self.links.send(worker, Cmd::Panel(cmd)).await;
            }
            Command::Grant { worker, piece } => self.links.send(worker, Cmd::Grant(piece)).await,
            Command::Store { piece, rect, .. } => {
                let Some((_, c)) = self.arrived.take().filter(|a| a.0 == piece) else {
                    bail!("internal error: piece {} is not at hand to store", piece.0);
                };
                self.sink
                    .store_block(&rect, &c)
                    .map_err(|e| anyhow!("storing piece {} of C: {e}", piece.0))?;
                (self.on_piece)(rect.area());
            }
            Command::Release { worker, cancel } => self.links.release(worker, cancel).await,
        }
        Ok(())
    }
}
