//! The batch state machine: every decision of a batch, as plain functions
//! over its state. It takes what the workers did, with timestamps (seconds
//! from the start of the run), and returns what the shell must do: which
//! transfer starts on the master's port, which results to keep, which worker
//! to let go. No sockets, no clocks, no tokio; the shell (`shell.rs`) carries
//! out the commands and tests drive it with a simulated platform.
//!
//! Invariants:
//! - only the machine starts a transfer, and only when the [`Port`] is free
//!   for it (one transfer at a time; two ports: one send and one return);
//! - every product is stored exactly once: a lost worker's unreturned
//!   products are planned again over the survivors at once (a recovery
//!   round that shares the port with the rounds still running), and nothing
//!   a lost worker says afterwards is taken;
//! - a recovery round never asks a worker to hold more than its `max_load`
//!   at once: what does not fit waits for results to come back.

use crate::adapt::{Observed, Phase};
use crate::on_demand::{OnDemand, Sizing};
use crate::port::Port;
use crate::record::{Adaptation, Failure, Measured, Recorder, Replan};
use crate::schedule::{Chunk, Event, Schedule};
use crate::sequenced::Sequenced;
use dls_lp::{Plan, Platform, Strategy};
use dls_protocol::ChunkId;
use std::collections::HashMap;
use std::sync::Arc;

/// How the machine runs a batch.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Largest chunk, in products.
    pub max_chunk: usize,
    /// Give up on a worker this many times later than its predicted compute
    /// end (plus a second), if set.
    pub straggler: Option<f64>,
    /// Fail the batch when nothing at all happens for this many seconds.
    pub stall_timeout: f64,
    /// Hand out chunks on demand, sized so, instead of the plan's loads
    /// (the self-scheduling and factoring baselines).
    pub self_schedule: Option<Sizing>,
    /// Seconds a worker may stay silent beyond its predicted reading time
    /// after a send.
    pub liveness: f64,
    /// Online correction of multi-round plans: between rounds, resize the
    /// chunks not yet sent from the speeds measured so far.
    pub adapt: bool,
}

impl Config {
    /// For simulated runs: chunks as planned, no straggler or stall limit,
    /// no online correction.
    pub fn simulated() -> Config {
        Config {
            max_chunk: usize::MAX,
            straggler: None,
            stall_timeout: 1e9,
            self_schedule: None,
            liveness: 1.0,
            adapt: false,
        }
    }
}

/// What a worker did, as the shell saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// It has the whole chunk.
    Received(ChunkId),
    /// It computed the chunk, in this many seconds of its own.
    Ready(ChunkId, f64),
    /// The master has the chunk's whole results (already checked for size
    /// by the shell against [`BatchMachine::expected`]).
    Results(ChunkId),
    /// Its connection ended, or it broke the protocol, or its results were
    /// wrong: the reason.
    Lost(String),
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Send these products (their A and B) as one chunk; the worker may take
    /// `reading` seconds to read it before it must answer.
    Assign {
        worker: usize,
        chunk: ChunkId,
        products: Arc<[usize]>,
        reading: f64,
    },
    /// Let the worker return this chunk's results.
    Grant { worker: usize, chunk: ChunkId },
    /// Keep the results just received for this chunk: they are these
    /// products, in this order.
    Store {
        worker: usize,
        chunk: ChunkId,
        products: Arc<[usize]>,
    },
    /// Stop talking to this worker (telling it to drop the job first if
    /// `cancel`).
    Release { worker: usize, cancel: bool },
}

/// Where the batch stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Running,
    /// Every product is stored.
    Done,
    /// Nothing more can be done: why.
    Failed(String),
}

/// One round: a schedule and the batch products of each of its chunks.
struct Round {
    sched: Schedule,
    jobs: HashMap<ChunkId, Arc<[usize]>>,
    /// Chunks are made as workers ask (self-scheduling, factoring), not
    /// when the round is planned: the round's products, which chunks
    /// index into.
    on_demand: Option<Arc<[usize]>>,
}

impl Round {
    /// The batch products of chunk `c` of this round.
    fn products(&self, c: &Chunk) -> Arc<[usize]> {
        match (self.jobs.get(&c.id), &self.on_demand) {
            (Some(j), _) => j.clone(),
            (None, Some(all)) => Arc::from(&all[c.start..c.start + c.len]),
            (None, None) => Arc::from(&[][..]),
        }
    }
}

pub struct BatchMachine {
    platform: Platform,
    strategy: Strategy,
    cfg: Config,
    port: Port,
    rounds: Vec<Round>,
    /// Chunk → its round.
    owner: HashMap<ChunkId, usize>,
    alive: Vec<bool>,
    stored: Vec<bool>,
    remaining: usize,
    /// Lost products waiting for room on a survivor.
    pending: Vec<usize>,
    /// Products planned for each worker and not back yet.
    committed: Vec<u64>,
    /// Workers the plan left out and online correction has not enrolled:
    /// the only ones it may enrol.
    left_out: Vec<bool>,
    /// Each worker's predicted compute end (seconds from the start).
    due: Vec<f64>,
    next_id: u64,
    last_progress: f64,
    failed: Option<String>,
    rec: Recorder,
    observed: Observed,
    /// An opened batch whose rest is not planned yet: the products from
    /// this one on wait for it ([`BatchMachine::add_rest`]).
    awaiting: Option<usize>,
}

impl BatchMachine {
    /// A machine for `plan` (made for `platform`) over a batch of
    /// `plan.load` products.
    pub fn new(platform: Platform, plan: &Plan, cfg: Config) -> Result<BatchMachine, String> {
        let total = plan.load as usize;
        BatchMachine::with_total(platform, plan, total, cfg)
    }

    /// A machine for a batch of `total` products whose first `opening.load`
    /// go out at once as `opening` (`dls_lp::opening`), while the rest is
    /// planned; [`BatchMachine::add_rest`] adds it. Until then the batch
    /// is running, whatever the opening does.
    pub fn opening(platform: Platform, opening: &Plan, total: usize, cfg: Config) -> Result<BatchMachine, String> {
        if cfg.self_schedule.is_some() || (opening.load as usize) >= total {
            return Err("an opening is a planned part of a larger batch".into());
        }
        let mut machine = BatchMachine::with_total(platform, opening, total, cfg)?;
        machine.awaiting = Some(opening.load as usize);
        Ok(machine)
    }

    /// The rest of a batch opened with [`BatchMachine::opening`], planned
    /// on `platform` (the opening's workers, its costs possibly paced) for
    /// the products after the opening's, added at `now` beside the
    /// opening. Its chunks for workers lost meanwhile wait for recovery
    /// like theirs. The commands to carry out.
    pub fn add_rest(&mut self, platform: Platform, rest: &Plan, now: f64) -> Result<Vec<Command>, String> {
        let (p, total) = (self.alive.len(), self.stored.len());
        let Some(from) = self.awaiting else {
            return Err("the batch was planned whole: it has no rest to add".into());
        };
        if platform.len() != p || rest.loads.len() != p || from as u64 + rest.load != total as u64 {
            return Err(format!(
                "the rest of the batch ({} products over {} workers) does not fit its opening ({from} of {total} over {p})",
                rest.load,
                rest.loads.len()
            ));
        }
        self.awaiting = None;
        self.clock(now);
        self.platform = platform;
        self.port.set_costs(self.platform.workers());
        self.strategy = rest.strategy;
        for (w, &l) in rest.loads.iter().enumerate() {
            self.left_out[w] &= l == 0;
        }
        self.observed = Observed::new(p, rest.makespan());
        let products: Vec<usize> = (from..total).collect();
        self.add_planned(rest, &products, now);
        let k = self.rounds.len() - 1;
        for w in (0..p).filter(|&w| !self.alive[w]) {
            let r = &mut self.rounds[k];
            for ch in r.sched.lose(w) {
                let lost = r.products(&ch);
                self.committed[w] = self.committed[w].saturating_sub(lost.len() as u64);
                self.pending.extend(lost.iter().copied());
            }
        }
        self.try_recover(now);
        Ok(self.poll(now))
    }

    fn with_total(platform: Platform, plan: &Plan, total: usize, cfg: Config) -> Result<BatchMachine, String> {
        let p = platform.len();
        if plan.loads.len() != p {
            return Err(format!(
                "the plan has {} workers but the platform {p}",
                plan.loads.len()
            ));
        }
        let m = plan.load as usize;
        let mut machine = BatchMachine {
            strategy: plan.strategy,
            cfg,
            port: Port::new(plan.ports, platform.workers()),
            rounds: Vec::new(),
            owner: HashMap::new(),
            alive: vec![true; p],
            stored: vec![false; total],
            remaining: total,
            pending: Vec::new(),
            committed: vec![0; p],
            left_out: plan.loads.iter().map(|&l| l == 0).collect(),
            due: vec![f64::INFINITY; p],
            next_id: 0,
            last_progress: 0.0,
            failed: None,
            rec: Recorder::new(p),
            observed: Observed::new(p, plan.makespan()),
            awaiting: None,
            platform,
        };
        let products: Vec<usize> = (0..m).collect();
        match cfg.self_schedule {
            Some(sizing) => {
                let mut workers: Vec<usize> = (0..p).filter(|&w| plan.loads[w] > 0).collect();
                if workers.is_empty() {
                    workers = (0..p).collect();
                }
                let wk = machine.platform.workers();
                let speeds: Vec<f64> = wk.iter().map(|x| 1.0 / x.w).collect();
                let caps: Vec<usize> = wk
                    .iter()
                    .map(|x| x.max_load.map_or(cfg.max_chunk, |b| (b as usize).min(cfg.max_chunk)))
                    .collect();
                let sched = OnDemand::new(&workers, m, sizing, &speeds, &caps, machine.next_id);
                machine.next_id += sched.id_span();
                machine.rounds.push(Round {
                    sched: Schedule::OnDemand(sched),
                    jobs: HashMap::new(),
                    on_demand: Some(products.into()),
                });
            }
            None => machine.add_planned(plan, &products, 0.0),
        }
        Ok(machine)
    }

    /// A planned round: the plan's chunks (split to at most `max_chunk`
    /// products, the pieces sent and returned back to back) take batch
    /// products in the order they are sent.
    fn add_planned(&mut self, plan: &Plan, products: &[usize], now: f64) {
        let mut seq = Sequenced::new(
            plan.ports,
            self.platform.workers(),
            &plan.sequence,
            self.cfg.max_chunk,
            self.next_id,
        );
        seq.at(now);
        let table = seq.pieces().to_vec();
        for c in &table {
            self.committed[c.worker] += c.len as u64;
        }
        self.push_due(plan, now);
        self.add_round(Schedule::Planned(seq), &table, products);
    }

    /// A round planned at `now` pushes back each of its workers' predicted
    /// compute end by the round's own (the straggler check's clock).
    fn push_due(&mut self, plan: &Plan, now: f64) {
        for (w, t) in plan.worker_times().iter().enumerate() {
            if plan.loads[w] > 0 {
                let start = if self.due[w].is_finite() {
                    self.due[w].max(now)
                } else {
                    now
                };
                self.due[w] = start + t.compute_end;
            }
        }
    }

    fn add_round(&mut self, sched: Schedule, table: &[Chunk], products: &[usize]) {
        let k = self.rounds.len();
        let mut jobs = HashMap::new();
        for c in table {
            jobs.insert(c.id, Arc::from(&products[c.start..c.start + c.len]));
            self.owner.insert(c.id, k);
            self.next_id = self.next_id.max(c.id.0 + 1);
        }
        self.rounds.push(Round {
            sched,
            jobs,
            on_demand: None,
        });
    }

    /// The first transfers.
    pub fn start(&mut self, now: f64) -> Vec<Command> {
        self.clock(now);
        self.last_progress = now;
        if self.remaining == 0 {
            return Vec::new();
        }
        self.poll(now)
    }

    pub fn status(&self) -> Status {
        match &self.failed {
            Some(why) => Status::Failed(why.clone()),
            None if self.remaining == 0 => Status::Done,
            None => Status::Running,
        }
    }

    /// The products of `chunk` if `worker` may return it now (it is alive
    /// and was granted the port for it), else `None`.
    pub fn expected(&self, worker: usize, chunk: ChunkId) -> Option<&[usize]> {
        if !self.alive.get(worker).copied().unwrap_or(false) {
            return None;
        }
        let round = &self.rounds[*self.owner.get(&chunk)?];
        let c = round.sched.chunk(chunk)?;
        (c.worker == worker).then(|| &round.jobs[&chunk][..])
    }

    /// What `worker` did at `now`.
    pub fn on_event(&mut self, worker: usize, input: Input, now: f64) -> Vec<Command> {
        if self.failed.is_some() || !self.alive.get(worker).copied().unwrap_or(false) {
            return Vec::new();
        }
        self.clock(now);
        self.last_progress = now;
        let mut out = Vec::new();
        let (event, chunk) = match input {
            Input::Lost(why) => {
                out.extend(self.lose(worker, why, false, now));
                out.extend(self.poll(now));
                return out;
            }
            Input::Received(chunk) => (Event::Received { worker, chunk }, chunk),
            Input::Ready(chunk, _) => (Event::Ready { worker, chunk }, chunk),
            Input::Results(chunk) => (Event::Results { worker, chunk }, chunk),
        };
        let accepted = match self.owner.get(&chunk) {
            Some(&k) => self.rounds[k].sched.on_event(event).map_err(|e| e.to_string()),
            None => Err(format!("unknown chunk {}", chunk.0)),
        };
        if let Err(e) = accepted {
            out.extend(self.lose(worker, format!("broke the protocol: {e}"), false, now));
            out.extend(self.poll(now));
            return out;
        }
        let k = self.owner[&chunk];
        let units = self.rounds[k].sched.chunk(chunk).map_or(0, |c| c.len);
        let len = units as f64;
        let (wk, lat) = (
            &self.platform.workers()[worker],
            self.platform.workers()[worker].latency,
        );
        // What a transfer should take: the port model's one cost rule.
        let ports = self.port.ports();
        let transfer = |send: bool| ports.transfer(wk, send, len).secs;
        match input {
            Input::Received(_) => {
                self.port.end(worker, chunk, true);
                let took = self.rec.end(worker, chunk, true, units, now);
                let predicted = transfer(true);
                self.observed
                    .see(worker, Phase::Send, took.unwrap_or(f64::NAN), predicted);
                self.maybe_adapt(k, chunk, now);
            }
            Input::Ready(_, secs) => {
                let took = self.rec.computed(worker, chunk, secs, now);
                self.rec.ready_to_return(worker, chunk, now);
                self.observed
                    .see(worker, Phase::Compute, took, lat.compute + wk.w * len);
            }
            Input::Results(_) => {
                self.port.end(worker, chunk, false);
                let took = self.rec.end(worker, chunk, false, units, now);
                let predicted = transfer(false);
                let took = took.map(|t| self.return_alone(worker, t, now));
                self.observed
                    .see(worker, Phase::Return, took.unwrap_or(f64::NAN), predicted);
                out.push(self.store(worker, chunk));
                self.try_recover(now);
                self.share_tail(now);
            }
            Input::Lost(_) => {}
        }
        let pace = [Phase::Send, Phase::Compute, Phase::Return].map(|ph| self.observed.factor(worker, ph));
        for r in &mut self.rounds {
            r.sched.pace(worker, pace);
        }
        out.extend(self.poll(now));
        out
    }

    /// What a return of `worker` that took `took` seconds until `now` would
    /// have taken alone: where its worker is slowed while it receives
    /// ([`dls_lp::Worker::return_receiving`]) and received meanwhile (two
    /// lanes), that part of it ran at a part of its rate, as planned, and
    /// is not the worker's pace.
    fn return_alone(&self, worker: usize, took: f64, now: f64) -> f64 {
        let speed = self.platform.workers()[worker].return_speed_receiving();
        if self.port.ports().one_lane() || speed >= 1.0 {
            return took;
        }
        let slowed = self.rec.receiving(worker, now - took, now);
        took - slowed * (1.0 - speed)
    }

    /// Time passes: stragglers and stalls.
    pub fn on_tick(&mut self, now: f64) -> Vec<Command> {
        if self.failed.is_some() || self.remaining == 0 {
            return Vec::new();
        }
        self.clock(now);
        let mut out = Vec::new();
        if let Some(f) = self.cfg.straggler {
            for w in 0..self.alive.len() {
                let waiting = self.alive[w] && self.rounds.iter().any(|r| r.sched.awaiting_ready(w));
                let due = self.due[w] * f + 1.0;
                if waiting && now > due {
                    let why = format!(
                        "straggling: not done {now:.2} s into the run (predicted compute end {:.2} s)",
                        self.due[w]
                    );
                    out.extend(self.lose(w, why, true, now));
                }
            }
        }
        if now - self.last_progress > self.cfg.stall_timeout {
            self.failed = Some(format!(
                "no worker made progress for {:.0} s; giving up",
                self.cfg.stall_timeout
            ));
            return out;
        }
        self.try_recover(now);
        self.share_tail(now);
        out.extend(self.poll(now));
        out
    }

    /// When the machine should be ticked even if nothing happens (a
    /// schedule that waits for a late worker decides by the clock), if
    /// sooner than the regular ticks matter.
    pub fn wake_at(&self) -> Option<f64> {
        if self.failed.is_some() || self.remaining == 0 {
            return None;
        }
        self.rounds
            .iter()
            .filter_map(|r| r.sched.wake_at(&self.port))
            .min_by(f64::total_cmp)
    }

    /// Every schedule's clock moves to `now`.
    fn clock(&mut self, now: f64) {
        for r in &mut self.rounds {
            r.sched.at(now);
        }
    }

    /// What changed the plan so far, oldest first: workers given up on,
    /// recovery rounds, online corrections (for the shell to report as
    /// they appear).
    pub fn incidents(&self) -> (&[Failure], &[Replan], &[Adaptation]) {
        (&self.rec.failures, &self.rec.replans, &self.rec.adaptations)
    }

    /// What was measured.
    /// Free workers enrolled by online correction so far.
    pub fn enrolments(&self) -> &[crate::record::Enrolment] {
        &self.rec.enrolments
    }

    pub fn finish(self) -> Measured {
        self.rec.finish()
    }

    fn store(&mut self, worker: usize, chunk: ChunkId) -> Command {
        let k = self.owner[&chunk];
        let products = self.rounds[k].jobs[&chunk].clone();
        for &g in products.iter() {
            debug_assert!(!self.stored[g], "product {g} stored twice");
            if !self.stored[g] {
                self.stored[g] = true;
                self.remaining -= 1;
            }
        }
        self.committed[worker] = self.committed[worker].saturating_sub(products.len() as u64);
        self.rec.products[worker] += products.len() as u64;
        Command::Store {
            worker,
            chunk,
            products,
        }
    }

    /// Start whatever the port has room for: sends first (oldest round
    /// first), then returns, as many as the port admits; the grants are
    /// handed out first.
    fn poll(&mut self, now: f64) -> Vec<Command> {
        let mut out = Vec::new();
        if self.failed.is_some() {
            return out;
        }
        'sends: loop {
            for (k, r) in self.rounds.iter_mut().enumerate() {
                if let Some(ch) = r.sched.next_send(&self.port) {
                    self.port.start(ch.worker, ch.id, true, ch.len);
                    self.rec.start(ch.worker, ch.id, true, now);
                    if r.on_demand.is_some() {
                        self.committed[ch.worker] += ch.len as u64;
                        let products = r.products(&ch);
                        r.jobs.insert(ch.id, products);
                        self.owner.insert(ch.id, k);
                    }
                    let cost = (self.port.ports())
                        .transfer(&self.platform.workers()[ch.worker], true, ch.len as f64)
                        .secs;
                    out.push(Command::Assign {
                        worker: ch.worker,
                        chunk: ch.id,
                        products: r.jobs[&ch.id].clone(),
                        reading: self.cfg.liveness + (3.0 * cost).min(3600.0),
                    });
                    continue 'sends;
                }
            }
            break;
        }
        'returns: loop {
            for r in &mut self.rounds {
                if let Some((worker, chunk, len)) = r.sched.next_return(&self.port) {
                    self.port.start(worker, chunk, false, len);
                    self.rec.start(worker, chunk, false, now);
                    out.push(Command::Grant { worker, chunk });
                    continue 'returns;
                }
            }
            break;
        }
        // Grants go out before the chunks decided with them: a grant
        // written after a chunk to the same worker reaches it only once
        // the whole chunk has (docs/planner.md).
        out.sort_by_key(|c| !matches!(c, Command::Grant { .. }));
        out
    }
}

mod correct;
mod recover;
#[cfg(test)]
mod tests;
