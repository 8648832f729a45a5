//! The async shell around the batch machine: it carries out the machine's
//! commands over the links, feeds back what the workers did with the time
//! it happened, checks the size of results and assembles C. It never
//! decides what to send, grant or give up on: the machine does.

use crate::runtime::batch::Batch;
use crate::runtime::data::Sink;
use crate::runtime::link_task::{Cmd, Ev, Links, Watch, Work};
use crate::runtime::log;
use crate::runtime::pool::Pool;
use anyhow::{anyhow, bail, Result};
use dls_core::machine::{BatchMachine, Command, Config, Input, Status};
use dls_core::record::Measured;
use dls_lp::{Plan, Platform};
use dls_protocol::{ChunkId, JobId, Values};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How to run. The port model is the plan's.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// Largest chunk, in bytes of A and B (a worker's load is split into
    /// chunks no larger, sent back to back).
    pub max_chunk_bytes: u64,
    /// A worker with work in flight must show a sign of life (a byte, a
    /// heartbeat answer) at least this often, and a send must make progress
    /// this often; otherwise the worker is lost.
    pub liveness: Duration,
    /// How often an otherwise silent worker is sent a heartbeat.
    pub heartbeat: Duration,
    /// Treat a worker as lost when it is this many times later than its
    /// predicted compute end (plus a second), if set.
    pub straggler: Option<f64>,
    /// Give up when nothing at all happens for this long.
    pub stall_timeout: Duration,
    /// Instead of the plan's loads, hand out chunks on demand, sized so
    /// (the self-scheduling and factoring baselines; the plan only names
    /// the workers and the predictions). Recovery rounds are planned as
    /// usual.
    pub self_schedule: Option<dls_core::on_demand::Sizing>,
    /// Online correction of multi-round plans (`--no-adapt` turns it off).
    pub adapt: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            // The master holds about one chunk's inputs and one chunk's
            // results at a time; 64 MiB chunks still move at full speed.
            max_chunk_bytes: 64 << 20,
            liveness: Duration::from_millis(1500),
            heartbeat: Duration::from_millis(250),
            straggler: None,
            stall_timeout: Duration::from_secs(120),
            self_schedule: None,
            adapt: true,
        }
    }
}

/// The run's output: C in batch order (n×m each, in the batch's type) when
/// it was kept in memory (empty when it went to another sink), the results
/// of the products the master recomputes (widened to f64), and the
/// measurements.
pub struct Outcome {
    pub c: Values,
    pub kept: BTreeMap<usize, Vec<f64>>,
    pub measured: Measured,
    /// The instant the measurements count from (the machine's 0 s).
    pub started: Instant,
    /// For an opened batch: the plan of the whole, and when its rest was
    /// ready.
    pub opened: Option<Opened>,
}

/// Where a run's results go: every product's C to `sink`, and the C of
/// the products in `keep` also into the outcome (for the master's
/// recomputation); `on_chunk` hears how many products were stored, each
/// time some are.
pub struct Results<'a> {
    pub sink: &'a mut dyn Sink,
    pub keep: BTreeSet<usize>,
    pub on_chunk: &'a mut (dyn FnMut(usize) + Send),
}

/// What a run carries out: a plan made before it, or an opening sent at
/// once while the plan of the whole batch is still being made
/// (`dls_lp::opening`).
pub enum Planned<'a> {
    Whole(&'a Plan),
    Opening(Box<Opening>),
}

/// An opened batch: its opening, the plan that carries it (one chunk),
/// and the planning of the whole batch under way: its platform (the
/// links' costs) and plan (paced, maybe).
pub struct Opening {
    pub opening: dls_lp::opening::Opening,
    pub first: Plan,
    pub planning: JoinHandle<Result<(Platform, Plan)>>,
}

/// What an opened batch ran: the platform its rest was planned for, the
/// plan of the whole (the opening first, `dls_lp::opening::split`), and
/// when its rest was ready (seconds from the start).
pub struct Opened {
    pub platform: Platform,
    pub plan: Plan,
    pub at: f64,
}

/// Run `plan` (made for `platform`, the links' costs, indexed like the
/// pool's links; the machine predicts with the costs the plan was timed
/// on, [`Plan::costs_on`]). Workers
/// that fail are given up on and their products redone over the survivors;
/// the links go back to the pool whatever happens. The outcome's `c` is
/// empty: C went to the sink.
pub async fn execute(
    pool: &mut Pool,
    platform: &Platform,
    planned: Planned<'_>,
    batch: &Batch,
    job: JobId,
    opts: &RunOptions,
    results: Results<'_>,
) -> Result<Outcome> {
    let p = pool.len();
    let owned;
    let (first, mut rest) = match planned {
        Planned::Whole(plan) => (plan, None),
        Planned::Opening(o) => {
            let Opening {
                opening,
                first,
                planning,
            } = *o;
            owned = first;
            let rest = Rest {
                opening,
                planning,
                sockets: Vec::new(),
            };
            (&owned, Some(rest))
        }
    };
    if first.loads.len() != p || platform.len() != p {
        bail!("the plan has {} workers but {p} are connected", first.loads.len());
    }
    let opened = rest.is_some();
    if !opened && first.load as usize != batch.count {
        bail!(
            "the plan is for {} products but the batch has {}",
            first.load,
            batch.count
        );
    }
    let cfg = Config {
        max_chunk: (opts.max_chunk_bytes / batch.form.in_bytes(1).max(1)).max(1) as usize,
        straggler: opts.straggler,
        stall_timeout: opts.stall_timeout.as_secs_f64(),
        self_schedule: opts.self_schedule,
        liveness: opts.liveness.as_secs_f64(),
        adapt: opts.adapt,
    };
    let mut machine = match opened {
        false => BatchMachine::new(first.costs_on(platform), first, cfg),
        true => BatchMachine::opening(first.costs_on(platform), first, batch.count, cfg),
    }
    .map_err(|e| anyhow!(e))?;
    let watch = Watch {
        liveness: opts.liveness,
        heartbeat: opts.heartbeat,
    };
    pace_links(pool, &first.pace, batch.form.in_bytes(1));
    let pieces = pieces(first);
    // An opened batch's pace is known once its rest is planned: its
    // sockets are reached through duplicates of their descriptors.
    if let Some(r) = rest.as_mut() {
        r.sockets = (pool.links().iter())
            .map(|l| l.conn.get_ref().as_fd().try_clone_to_owned().ok())
            .collect();
    }
    let (links, ev_rx) = Links::spawn(pool, &Work::Batch(batch.clone()), job, watch, &pieces)?;
    let mut shell = Shell {
        batch,
        platform,
        seen: log::Seen::default(),
        links,
        sink: results.sink,
        keep: results.keep,
        kept: BTreeMap::new(),
        arrived: None,
        on_chunk: results.on_chunk,
    };
    let started = Instant::now();
    let result = shell.drive(&mut machine, ev_rx, started, &mut rest).await;
    let restored = shell.links.restore(pool).await;
    // An opened batch's rest may have paced sockets, whether or not the
    // run then ended well: every limit is lifted.
    if opened || !first.pace.is_empty() {
        unpace_links(pool);
    }
    if let Some(r) = rest {
        r.planning.abort(); // the run failed before its plan was made
    }
    restored?;
    let opened = result?;
    Ok(Outcome {
        c: Values::default(),
        kept: shell.kept,
        measured: machine.finish(),
        started,
        opened,
    })
}

/// Which links cut their chunks in pieces (see `LinkTask::pieces`): only
/// paced ones, and only where a return may cross a send (two lanes).
fn pieces(plan: &Plan) -> Vec<bool> {
    (0..plan.loads.len())
        .map(|i| !plan.ports.one_lane() && plan.pace.get(i).is_some_and(|p| p.is_some()))
        .collect()
}

/// Pace the sockets of the workers the whole plan paces (through
/// `sockets`, duplicates of theirs; `unit` bytes a product), and have
/// their links cut their chunks as a paced plan's do.
async fn pace_rest(
    links: &Links,
    platform: &Platform,
    unit: u64,
    sockets: &[Option<std::os::fd::OwnedFd>],
    whole: &Plan,
) {
    for (i, on) in pieces(whole).into_iter().enumerate() {
        let (Some(Some(p)), Some(Some(fd))) = (whole.pace.get(i), sockets.get(i)) else {
            continue;
        };
        hold(fd, &platform.workers()[i].name, p, unit);
        if on {
            links.send(i, Cmd::Pieces(true)).await;
        }
    }
}

/// The rest of an opened batch, being planned, and duplicates of the
/// links' sockets to pace them by once it is.
struct Rest {
    opening: dls_lp::opening::Opening,
    planning: JoinHandle<Result<(Platform, Plan)>>,
    sockets: Vec<Option<std::os::fd::OwnedFd>>,
}

/// Hold the sends to each paced worker near its pace
/// (`Pace::socket_rate`). A socket that cannot be paced is run at full
/// speed: the run's corrections then see its transfers as they are.
fn pace_links(pool: &mut Pool, pace: &[Option<dls_lp::pace::Pace>], unit_bytes: u64) {
    for (link, p) in pool.links().iter().zip(pace) {
        if let Some(p) = p {
            hold(link.conn.get_ref(), &link.name, p, unit_bytes);
        }
    }
}

/// Hold the sends on `socket` (to `worker`) near `pace` for products of
/// `unit_bytes`, or say why they run at full speed.
fn hold(socket: &impl AsFd, worker: &str, pace: &dls_lp::pace::Pace, unit_bytes: u64) {
    if let Err(e) = dls_common::pace(socket, Some(pace.socket_rate(unit_bytes))) {
        tracing::warn!(
            worker,
            "cannot pace the sends to this worker ({e}): they run at full speed"
        );
    }
}

/// Lift every limit on the sends of the links the pool still has (a lost
/// one may have shifted the others).
fn unpace_links(pool: &mut Pool) {
    for link in pool.links() {
        let _ = dls_common::pace(link.conn.get_ref(), None);
    }
}

struct Shell<'a> {
    batch: &'a Batch,
    platform: &'a Platform,
    /// The machine's incidents already logged.
    seen: log::Seen,
    links: Links,
    sink: &'a mut dyn Sink,
    keep: BTreeSet<usize>,
    kept: BTreeMap<usize, Vec<f64>>,
    /// The payload of the results just handed to the machine.
    arrived: Option<(ChunkId, Values)>,
    on_chunk: &'a mut (dyn FnMut(usize) + Send),
}

impl Shell<'_> {
    async fn drive(
        &mut self,
        machine: &mut BatchMachine,
        mut events: mpsc::Receiver<(usize, Ev)>,
        t0: Instant,
        rest: &mut Option<Rest>,
    ) -> Result<Option<Opened>> {
        let mut opened = None;
        // The machine's clock never goes back: events of different link
        // tasks, each stamped when read, may reach this loop a few
        // microseconds out of order.
        let mut last = 0.0f64;
        let mut secs = |t: Instant| {
            last = last.max(t.duration_since(t0).as_secs_f64());
            last
        };
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut commands = machine.start(0.0);
        loop {
            log::incidents(self.platform, machine, &mut self.seen);
            for cmd in commands.drain(..) {
                self.carry_out(cmd).await?;
            }
            match machine.status() {
                Status::Done => return Ok(opened),
                Status::Failed(why) => bail!(why),
                Status::Running => {}
            }
            // A schedule waiting on a late worker decides by the clock:
            // wake then too (never later than the regular tick).
            let wake = machine
                .wake_at()
                .map(|t| t0 + Duration::from_secs_f64(t.clamp(0.0, 1e6)))
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            let (worker, ev) = tokio::select! {
                e = events.recv() => e.ok_or_else(|| anyhow!("every worker connection ended before the batch was done"))?,
                planned = async { (&mut rest.as_mut().expect("a rest being planned").planning).await }, if rest.is_some() => {
                    let r = rest.take().expect("a rest being planned");
                    let (platform, plan) = planned.map_err(|e| anyhow!("internal error: planning the batch: {e}"))??;
                    let at = secs(Instant::now());
                    let costs = plan.costs_on(&platform);
                    let (whole, part) = dls_lp::opening::split(&costs, &plan, r.opening, at);
                    pace_rest(&self.links, self.platform, self.batch.form.in_bytes(1), &r.sockets, &whole).await;
                    log::opened(&platform, &whole, at);
                    commands = machine.add_rest(costs, &part, at).map_err(|e| anyhow!("internal error: {e}"))?;
                    opened = Some(Opened { platform, plan: whole, at });
                    continue;
                }
                _ = tick.tick() => {
                    commands = machine.on_tick(secs(Instant::now()));
                    continue;
                }
                _ = tokio::time::sleep_until(wake.into()) => {
                    commands = machine.on_tick(secs(Instant::now()));
                    continue;
                }
            };
            let (input, at) = match ev {
                Ev::Received(chunk, at) => (Input::Received(chunk), at),
                Ev::Ready(chunk, s, at) => (Input::Ready(chunk, s), at),
                Ev::Failed(why) => (Input::Lost(why), Instant::now()),
                Ev::Fatal(why) => bail!(why),
                Ev::Results(chunk, payload, at) => match self.check(machine.expected(worker, chunk), chunk, &payload) {
                    Ok(()) => {
                        self.arrived = Some((chunk, payload));
                        (Input::Results(chunk), at)
                    }
                    Err(why) => (Input::Lost(why), at),
                },
            };
            commands = machine.on_event(worker, input, secs(at));
        }
    }

    /// Whether a chunk's results can be taken: granted and the right size
    /// (each product's value was checked by its link task).
    fn check(&self, products: Option<&[usize]>, chunk: ChunkId, payload: &Values) -> Result<(), String> {
        let c_len = self.batch.form.shape.c_len() as usize;
        let Some(products) = products else {
            return Err(format!("returned chunk {} it was not granted", chunk.0));
        };
        if payload.len() != products.len() * c_len || payload.dtype() != self.batch.form.dtype {
            return Err(format!(
                "returned {} {} values for chunk {} ({} {} expected)",
                payload.len(),
                payload.dtype(),
                chunk.0,
                products.len() * c_len,
                self.batch.form.dtype
            ));
        }
        Ok(())
    }

    async fn carry_out(&mut self, cmd: Command) -> Result<()> {
        let (worker, msg) = match cmd {
            Command::Assign {
                worker,
                chunk,
                products,
                reading,
            } => (worker, Cmd::Assign(chunk, products, Duration::from_secs_f64(reading))),
            Command::Grant { worker, chunk } => (worker, Cmd::Grant(chunk)),
            Command::Store { chunk, products, .. } => {
                let c_len = self.batch.form.shape.c_len() as usize;
                let Some((_, payload)) = self.arrived.take().filter(|a| a.0 == chunk) else {
                    bail!(
                        "internal error: the results of chunk {} are not at hand to store",
                        chunk.0
                    );
                };
                for (j, &g) in products.iter().enumerate() {
                    if self.keep.contains(&g) {
                        let range = j * c_len..(j + 1) * c_len;
                        self.kept.insert(g, payload.to_f64(range).into_owned());
                    }
                }
                // Products consecutive in the batch are stored in one go.
                let mut j = 0;
                while j < products.len() {
                    let run = 1 + products[j + 1..]
                        .iter()
                        .zip(products[j..].iter())
                        .take_while(|(next, prev)| **next == **prev + 1)
                        .count();
                    let (first, last) = (products[j], products[j + run - 1]);
                    self.sink
                        .store_run(first, &payload, j * c_len..(j + run) * c_len, c_len)
                        .map_err(|e| anyhow!("storing the results of products {first} to {last}: {e}"))?;
                    j += run;
                }
                (self.on_chunk)(products.len());
                return Ok(());
            }
            Command::Release { worker, cancel } => {
                self.links.release(worker, cancel).await;
                return Ok(());
            }
        };
        self.links.send(worker, msg).await;
        Ok(())
    }
}
