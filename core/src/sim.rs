//! A simulated platform that drives the [`BatchMachine`]: workers that
//! receive, compute in arrival order and return when granted, at given
//! true costs, every command and reply through the real codec, with
//! workers killed at chosen points or slowed partway. Deterministic, so
//! tests, experiments and benchmarks can run a batch without sockets.

use crate::machine::{BatchMachine, Command, Config, Input, Status};
use crate::record::Measured;
use bytes::BytesMut;
use dls_lp::lane::Fluid;
use dls_lp::{Plan, Platform, Ports, Worker};
use dls_protocol::{frame, ChunkId, Frame, FromWorker, JobId, ToWorker};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// Through the codec and back; the message must survive unchanged.
fn wire<M>(f: Frame<M>)
where
    M: serde::Serialize + serde::de::DeserializeOwned + dls_protocol::Payload + PartialEq + std::fmt::Debug + Clone,
{
    let mut buf = BytesMut::new();
    frame::encode(&f, &mut buf).expect("encodes");
    let back = frame::decode::<M>(&mut buf, 1 << 30).expect("decodes").expect("whole");
    assert_eq!(back, f);
    assert!(buf.is_empty(), "no stray bytes");
}

/// Where a worker is with a chunk when it dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum At {
    /// Halfway through the send of its chunk.
    Sending,
    /// Just after it has the chunk, before it has computed it.
    Computing,
    /// Computed, results held, waiting for its grant.
    AwaitingGrant,
    /// Halfway through the return of its results.
    Returning,
}

/// Kill `worker` at `stage` of its `nth` chunk (0-based, in the order its
/// chunks reach that stage).
#[derive(Debug, Clone, Copy)]
pub struct Kill {
    pub worker: usize,
    pub stage: At,
    pub nth: usize,
}

pub fn kill(worker: usize, stage: At, nth: usize) -> Kill {
    Kill { worker, stage, nth }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum SimEv {
    Received(ChunkId),
    Ready(ChunkId),
    Results(ChunkId),
    Die,
    /// The transfer of this key, granted before its chunk was computed,
    /// starts.
    Begin(u64),
    /// The next transfer on a lane ends, unless the lane changed since
    /// (its count of changes then).
    Ends(usize, u64),
}

/// A transfer the simulation carries.
#[derive(Debug, Clone, Copy)]
struct Flow {
    worker: usize,
    chunk: ChunkId,
    send: bool,
}

#[derive(Debug, PartialEq)]
struct Timed(f64, u64, usize, SimEv);
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timed {
    fn cmp(&self, o: &Self) -> Ordering {
        // Earliest first; ties in order of scheduling.
        o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
    }
}

/// What a simulated run did.
pub struct Run {
    pub status: Status,
    /// When the machine stopped running (simulated seconds).
    pub end: f64,
    pub measured: Measured,
    /// How many times each product was stored.
    pub stored: Vec<u32>,
    /// (start, end, is_send, worker) of every transfer that completed.
    pub transfers: Vec<(f64, f64, bool, usize)>,
    /// The most products each worker held at once (sent, not yet returned).
    pub max_held: Vec<usize>,
}

/// `worker` computes `factor` times slower (or faster) from its `after`-th
/// product on (chunk by chunk: a chunk started past it is all changed).
#[derive(Debug, Clone, Copy)]
pub struct Change {
    pub worker: usize,
    pub after: usize,
    pub factor: f64,
}

/// What goes wrong in a simulated run: workers killed at given points, a
/// worker whose speed changes partway.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    pub kills: Vec<Kill>,
    pub change: Option<Change>,
}

struct Sim {
    /// The port model, which says what a transfer takes.
    ports: Ports,
    truth: Vec<Worker>,
    change: Option<Change>,
    /// Products each worker has started computing.
    started: Vec<usize>,
    /// Each chunk's computing time, as the worker reports it.
    secs: HashMap<ChunkId, f64>,
    queue: BinaryHeap<Timed>,
    seq: u64,
    compute_free: Vec<f64>,
    dead: Vec<bool>,
    kills: Vec<Kill>,
    /// Chunks of each worker that reached each stage so far.
    reached: HashMap<(usize, At), usize>,
    lens: HashMap<ChunkId, usize>,
    /// When each chunk is computed (a return granted earlier waits for it).
    ready_at: HashMap<ChunkId, f64>,
    open: HashMap<(usize, ChunkId, bool), f64>,
    /// Each lane's transfers under way (returns' own lane with two), each
    /// by its key, and how many times each lane changed.
    lanes: [Fluid<u64>; 2],
    changes: [u64; 2],
    flows: HashMap<u64, Flow>,
    keys: u64,
    /// Chunks granted before they were received: returned once computed.
    early: Vec<ChunkId>,
    transfers: Vec<(f64, f64, bool, usize)>,
    stored: Vec<u32>,
    held: Vec<usize>,
    max_held: Vec<usize>,
}

const JOB: JobId = JobId(7);

impl Sim {
    /// The lane a transfer takes: sends', or returns' own with two.
    fn lane(&self, send: bool) -> usize {
        usize::from(!send && !self.ports.one_lane())
    }

    /// A transfer starts at `t` on its lane, beside those under way
    /// there, at the rates [`dls_lp::lane`] gives them all.
    fn begin(&mut self, key: u64, t: f64) {
        let f = self.flows[&key];
        let cost = self
            .ports
            .transfer(&self.truth[f.worker], f.send, self.lens[&f.chunk] as f64);
        let l = self.lane(f.send);
        let speed = if f.send { 1.0 } else { self.return_speed(f.worker) };
        self.lanes[l].start_at(t, key, cost.secs, cost.share, speed);
        self.changed(l);
        if f.send {
            self.respeed(f.worker, t);
        }
    }

    /// The speed of `worker`'s return now: slowed while a send of its own
    /// is under way on the other lane ([`Worker::return_receiving`]).
    fn return_speed(&self, worker: usize) -> f64 {
        let slowed = self.truth[worker].return_speed_receiving();
        let receiving =
            || (self.flows.iter()).any(|(&k, f)| f.worker == worker && f.send && self.lanes[0].end_of(k).is_some());
        if slowed < 1.0 && !self.ports.one_lane() && receiving() {
            slowed
        } else {
            1.0
        }
    }

    /// `worker` started or stopped receiving at `t`: its returns under way
    /// (two lanes) run at the speed that now holds.
    fn respeed(&mut self, worker: usize, t: f64) {
        if self.ports.one_lane() || self.truth[worker].return_speed_receiving() >= 1.0 {
            return;
        }
        let speed = self.return_speed(worker);
        let mine: Vec<u64> = (self.flows.iter())
            .filter(|(&k, f)| f.worker == worker && !f.send && self.lanes[1].end_of(k).is_some())
            .map(|(&k, _)| k)
            .collect();
        for &k in &mine {
            self.lanes[1].set_speed(t, k, speed);
        }
        if !mine.is_empty() {
            self.changed(1);
        }
    }

    /// What a transfer of `chunk` to (or from) `worker` takes alone.
    fn alone(&self, worker: usize, chunk: ChunkId, send: bool) -> f64 {
        (self.ports)
            .transfer(&self.truth[worker], send, self.lens[&chunk] as f64)
            .secs
    }

    /// `worker` returns `chunk` from `start` on (now or, granted before it
    /// was computed, once it is).
    fn return_from(&mut self, worker: usize, chunk: ChunkId, start: f64, now: f64) {
        let key = self.flow(worker, chunk, false);
        self.open.insert((worker, chunk, false), start);
        if start > now {
            self.push(start, worker, SimEv::Begin(key));
        } else {
            self.begin(key, start);
        }
        let alone = self.alone(worker, chunk, false);
        self.reach(worker, At::Returning, start, alone);
    }

    /// A new transfer of `worker` and `chunk` (a send if `send`): its key.
    fn flow(&mut self, worker: usize, chunk: ChunkId, send: bool) -> u64 {
        self.keys += 1;
        self.flows.insert(self.keys, Flow { worker, chunk, send });
        self.keys
    }

    /// Lane `l`'s rates changed: when its next transfer ends now.
    fn changed(&mut self, l: usize) {
        self.changes[l] += 1;
        if let Some((end, _)) = self.lanes[l].next_end() {
            self.push(end, 0, SimEv::Ends(l, self.changes[l]));
        }
    }

    /// The next transfer on lane `l` ends at `t` (if the lane has not
    /// changed since `change`): a send's chunk is in, and computed once the
    /// worker is free; a return's results are in.
    fn ends(&mut self, l: usize, change: u64, t: f64) {
        if change != self.changes[l] {
            return;
        }
        let Some((end, key)) = self.lanes[l].next_end() else {
            return;
        };
        self.lanes[l].finish(end, key);
        self.changed(l);
        let f = self.flows.remove(&key).expect("a transfer under way");
        if !f.send {
            self.push(t, f.worker, SimEv::Results(f.chunk));
            return;
        }
        self.respeed(f.worker, t);
        let done = t.max(self.compute_free[f.worker]) + self.secs[&f.chunk];
        self.compute_free[f.worker] = done;
        self.ready_at.insert(f.chunk, done);
        self.push(t, f.worker, SimEv::Received(f.chunk));
        self.push(done, f.worker, SimEv::Ready(f.chunk));
        if let Some(k) = self.early.iter().position(|&c| c == f.chunk) {
            self.early.swap_remove(k);
            self.return_from(f.worker, f.chunk, done, t);
        }
    }

    /// A worker is gone: its transfers under way stop.
    fn drop_flows(&mut self, worker: usize, t: f64) {
        let mine: Vec<(u64, usize)> = (self.flows.iter())
            .filter(|(_, f)| f.worker == worker)
            .map(|(&k, f)| (k, self.lane(f.send)))
            .filter(|&(k, l)| self.lanes[l].end_of(k).is_some())
            .collect();
        for &(key, l) in &mine {
            self.lanes[l].finish(t, key);
            self.flows.remove(&key);
        }
        for l in 0..2 {
            if mine.iter().any(|m| m.1 == l) {
                self.changed(l);
            }
        }
    }

    fn push(&mut self, t: f64, worker: usize, ev: SimEv) {
        self.seq += 1;
        self.queue.push(Timed(t, self.seq, worker, ev));
    }

    /// A chunk of `worker` reaches `stage` at `now`, for `span` seconds:
    /// schedule its death if a kill says so.
    fn reach(&mut self, worker: usize, stage: At, now: f64, span: f64) {
        let n = self.reached.entry((worker, stage)).or_insert(0);
        let nth = *n;
        *n += 1;
        if self
            .kills
            .iter()
            .any(|k| k.worker == worker && k.stage == stage && k.nth == nth)
        {
            self.push(now + span / 2.0, worker, SimEv::Die);
        }
    }

    fn carry_out(&mut self, cmd: Command, now: f64) {
        match cmd {
            Command::Assign {
                worker,
                chunk,
                products,
                reading,
            } => {
                assert!(reading > 0.0);
                let len = products.len();
                let msg = ToWorker::Assign {
                    job: JOB,
                    chunk,
                    form: dls_protocol::Form::square(1),
                    count: len as u32,
                };
                wire(Frame::with_payload(msg, vec![1.0f64; 2 * len]));
                self.lens.insert(chunk, len);
                self.held[worker] += len;
                self.max_held[worker] = self.max_held[worker].max(self.held[worker]);
                self.open.insert((worker, chunk, true), now);
                let key = self.flow(worker, chunk, true);
                self.begin(key, now);
                let w = &self.truth[worker];
                let slower = self
                    .change
                    .filter(|c| c.worker == worker && self.started[worker] >= c.after)
                    .map_or(1.0, |c| c.factor);
                self.started[worker] += len;
                let secs = w.latency.compute + len as f64 * w.w * slower;
                self.secs.insert(chunk, secs);
                // Killed halfway through its time alone, which is never
                // after its end.
                let alone = self.alone(worker, chunk, true);
                self.reach(worker, At::Sending, now, alone);
            }
            Command::Grant { worker, chunk } => {
                wire(Frame::new(ToWorker::Grant { job: JOB, chunk }));
                // Granted before it is computed: returned once it is.
                let Some(&ready) = self.ready_at.get(&chunk) else {
                    self.early.push(chunk);
                    return;
                };
                self.return_from(worker, chunk, ready.max(now), now);
            }
            Command::Store { products, .. } => {
                for &g in products.iter() {
                    self.stored[g] += 1;
                }
            }
            Command::Release { worker, cancel } => {
                if cancel {
                    wire(Frame::new(ToWorker::Cancel { job: JOB }));
                }
                self.dead[worker] = true;
                self.drop_flows(worker, now);
            }
        }
    }

    /// The worker's reply crosses the wire; the input the shell would give.
    fn reply(&mut self, worker: usize, ev: SimEv, t: f64) -> Input {
        match ev {
            SimEv::Received(chunk) => {
                wire(Frame::new(FromWorker::Received { job: JOB, chunk }));
                let start = self.open.remove(&(worker, chunk, true)).expect("a send was open");
                self.transfers.push((start, t, true, worker));
                self.reach(worker, At::Computing, t, 0.0);
                Input::Received(chunk)
            }
            SimEv::Ready(chunk) => {
                let secs = self.secs[&chunk];
                wire(Frame::new(FromWorker::Ready {
                    job: JOB,
                    chunk,
                    compute_secs: secs,
                }));
                self.reach(worker, At::AwaitingGrant, t, 0.0);
                Input::Ready(chunk, secs)
            }
            SimEv::Results(chunk) => {
                let len = self.lens[&chunk];
                let msg = FromWorker::Results {
                    job: JOB,
                    chunk,
                    form: dls_protocol::Form::square(1),
                    count: len as u32,
                };
                wire(Frame::with_payload(msg, vec![0.5f64; len]));
                let start = self.open.remove(&(worker, chunk, false)).expect("a return was open");
                self.transfers.push((start, t, false, worker));
                self.held[worker] -= len;
                Input::Results(chunk)
            }
            SimEv::Die => {
                self.dead[worker] = true;
                self.drop_flows(worker, t);
                Input::Lost("killed".into())
            }
            SimEv::Begin(_) | SimEv::Ends(..) => unreachable!("the simulation's own events reach no worker"),
        }
    }
}

/// Run `plan` (made for `platform`) through a [`BatchMachine`] on
/// simulated workers whose true costs are `truth`, each transfer taking
/// what the plan's port model says it takes (behind a shared uplink, the
/// simulation trusts the machine to start transfers only as the uplink's
/// lanes allow, tests check that it does, and runs those under way at the
/// rates [`dls_lp::lane`] gives them together), with `faults`; the
/// machine is ticked every 50 simulated milliseconds and whenever it asks.
///
/// # Panics
/// If the machine breaks the protocol's rules that the simulation checks
/// (a message that does not survive the codec, a return not granted), or
/// runs a million steps without ending: a bug of the machine.
/// Whether no grant in `commands` (decided at one instant) comes after a
/// chunk sent to its worker: on the wire the grant would wait for the
/// whole chunk.
fn grants_first(commands: &[Command]) -> bool {
    commands.iter().enumerate().all(|(i, c)| match c {
        Command::Grant { worker, .. } => !commands[..i]
            .iter()
            .any(|e| matches!(e, Command::Assign { worker: w, .. } if w == worker)),
        _ => true,
    })
}

pub fn simulate(platform: &Platform, truth: &[Worker], plan: &Plan, cfg: Config, faults: &Faults) -> Run {
    let machine = BatchMachine::new(platform.clone(), plan, cfg).expect("machine");
    drive(
        machine,
        platform.len(),
        plan.ports,
        plan.load as usize,
        truth,
        faults,
        None,
    )
}

/// The rest of an opened batch: added to the machine at `at` seconds, on
/// its platform (`dls_lp::opening`).
pub struct Rest<'a> {
    pub at: f64,
    pub platform: &'a Platform,
    pub plan: &'a Plan,
}

/// As [`simulate`], for a batch of `total` products opened with `opening`
/// (made for `platform`), whose `rest` the machine is given at `rest.at`.
///
/// # Panics
/// As [`simulate`]; also if the machine refuses the opening or the rest.
pub fn simulate_opened(
    platform: &Platform,
    truth: &[Worker],
    opening: &Plan,
    total: usize,
    rest: Rest<'_>,
    cfg: Config,
    faults: &Faults,
) -> Run {
    let machine = BatchMachine::opening(platform.clone(), opening, total, cfg).expect("machine");
    drive(machine, platform.len(), opening.ports, total, truth, faults, Some(rest))
}

fn drive(
    mut machine: BatchMachine,
    p: usize,
    ports: Ports,
    total: usize,
    truth: &[Worker],
    faults: &Faults,
    mut rest: Option<Rest<'_>>,
) -> Run {
    let (kills, change) = (&faults.kills, faults.change);
    let mut sim = Sim {
        ports,
        truth: truth.to_vec(),
        change,
        started: vec![0; p],
        secs: HashMap::new(),
        queue: BinaryHeap::new(),
        seq: 0,
        compute_free: vec![0.0; p],
        dead: vec![false; p],
        kills: kills.to_vec(),
        reached: HashMap::new(),
        lens: HashMap::new(),
        ready_at: HashMap::new(),
        open: HashMap::new(),
        lanes: [Fluid::default(), Fluid::default()],
        changes: [0; 2],
        flows: HashMap::new(),
        keys: 0,
        early: Vec::new(),
        transfers: Vec::new(),
        stored: vec![0; total],
        held: vec![0; p],
        max_held: vec![0; p],
    };
    let tick = 0.05;
    let (mut now, mut next_tick) = (0.0, tick);
    let mut commands = machine.start(0.0);
    let mut steps = 0;
    loop {
        debug_assert!(
            grants_first(&commands),
            "a grant handed out after a chunk decided with it: {commands:?}"
        );
        for cmd in commands.drain(..) {
            sim.carry_out(cmd, now);
        }
        if machine.status() != Status::Running {
            break;
        }
        steps += 1;
        assert!(steps < 1_000_000, "the simulation does not end");
        let next = sim.queue.peek().map(|t| t.0);
        // The shell wakes the machine when it asks to, as well as on ticks.
        let due = machine
            .wake_at()
            .filter(|&w| w > now)
            .map_or(next_tick, |w| w.min(next_tick));
        if let Some(r) = rest.take_if(|r| r.at <= due && next.is_none_or(|t| r.at <= t)) {
            now = now.max(r.at);
            commands = machine
                .add_rest(r.platform.clone(), r.plan, now)
                .expect("the rest fits");
            continue;
        }
        if next.is_none_or(|t| t > due) {
            now = due;
            if due >= next_tick {
                next_tick += tick;
            }
            commands = machine.on_tick(now);
            continue;
        }
        let Some(Timed(t, _, worker, ev)) = sim.queue.pop() else {
            break;
        };
        match ev {
            SimEv::Ends(l, change) => {
                sim.ends(l, change, t);
                continue;
            }
            SimEv::Begin(key) => {
                if sim.dead[worker] {
                    sim.flows.remove(&key);
                } else {
                    sim.begin(key, t);
                }
                continue;
            }
            _ => {}
        }
        if sim.dead[worker] {
            continue;
        }
        now = t;
        let input = sim.reply(worker, ev, t);
        commands = machine.on_event(worker, input, t);
    }
    Run {
        status: machine.status(),
        end: now,
        stored: sim.stored,
        transfers: sim.transfers,
        max_held: sim.max_held,
        measured: machine.finish(),
    }
}
