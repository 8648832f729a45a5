//! The batch machine against a simulated platform. Every command and reply
//! goes through the real codec; simulated workers receive, compute in
//! arrival order and return when granted, at their true costs. Checks: the
//! simulated run reproduces the planner's timeline (an independent
//! computation of the same schedule), never two transfers at once, and every
//! product stored exactly once whatever is lost, and when.

use super::*;
use bytes::BytesMut;
use dls_lp::{plan, Ports, Request, Rounding, Strategy, Worker};
use dls_protocol::{frame, Frame, FromWorker, JobId, ToWorker};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

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
enum Stage {
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
struct Kill {
    worker: usize,
    stage: Stage,
    nth: usize,
}

fn kill(worker: usize, stage: Stage, nth: usize) -> Kill {
    Kill { worker, stage, nth }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum SimEv {
    Received(ChunkId),
    Ready(ChunkId),
    Results(ChunkId),
    Die,
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
struct Run {
    status: Status,
    end: f64,
    measured: Measured,
    /// How many times each product was stored.
    stored: Vec<u32>,
    /// (start, end, is_send, worker) of every transfer that completed.
    transfers: Vec<(f64, f64, bool, usize)>,
    /// The most products each worker held at once (sent, not yet returned).
    max_held: Vec<usize>,
}

/// `worker` computes `factor` times slower (or faster) from its `after`-th
/// product on (chunk by chunk: a chunk started past it is all changed).
#[derive(Debug, Clone, Copy)]
struct Change {
    worker: usize,
    after: usize,
    factor: f64,
}

struct Sim {
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
    reached: HashMap<(usize, Stage), usize>,
    lens: HashMap<ChunkId, usize>,
    open: HashMap<(usize, ChunkId, bool), f64>,
    transfers: Vec<(f64, f64, bool, usize)>,
    stored: Vec<u32>,
    held: Vec<usize>,
    max_held: Vec<usize>,
}

const JOB: JobId = JobId(7);

impl Sim {
    fn push(&mut self, t: f64, worker: usize, ev: SimEv) {
        self.seq += 1;
        self.queue.push(Timed(t, self.seq, worker, ev));
    }

    /// A chunk of `worker` reaches `stage` at `now`, for `span` seconds:
    /// schedule its death if a kill says so.
    fn reach(&mut self, worker: usize, stage: Stage, now: f64, span: f64) {
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
                let w = &self.truth[worker];
                let got = now + w.latency.send + len as f64 * w.c;
                let slower = self
                    .change
                    .filter(|c| c.worker == worker && self.started[worker] >= c.after)
                    .map_or(1.0, |c| c.factor);
                self.started[worker] += len;
                let secs = w.latency.compute + len as f64 * w.w * slower;
                self.secs.insert(chunk, secs);
                let done = got.max(self.compute_free[worker]) + secs;
                self.compute_free[worker] = done;
                self.push(got, worker, SimEv::Received(chunk));
                self.push(done, worker, SimEv::Ready(chunk));
                self.reach(worker, Stage::Sending, now, got - now);
            }
            Command::Grant { worker, chunk } => {
                wire(Frame::new(ToWorker::Grant { job: JOB, chunk }));
                self.open.insert((worker, chunk, false), now);
                let span = self.truth[worker].latency.ret + self.lens[&chunk] as f64 * self.truth[worker].d;
                self.push(now + span, worker, SimEv::Results(chunk));
                self.reach(worker, Stage::Returning, now, span);
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
                self.reach(worker, Stage::Computing, t, 0.0);
                Input::Received(chunk)
            }
            SimEv::Ready(chunk) => {
                let secs = self.secs[&chunk];
                wire(Frame::new(FromWorker::Ready {
                    job: JOB,
                    chunk,
                    compute_secs: secs,
                }));
                self.reach(worker, Stage::AwaitingGrant, t, 0.0);
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
                Input::Lost("killed".into())
            }
        }
    }
}

/// Run `plan` (made for `platform`) on simulated workers whose true costs
/// are `truth`, with `kills`; ticks every `tick` simulated seconds.
fn simulate(platform: &Platform, truth: &[Worker], plan: &Plan, cfg: Config, kills: &[Kill]) -> Run {
    simulate_changing(platform, truth, plan, cfg, kills, None)
}

/// As [`simulate`], a worker's speed changing partway if `change` says so.
fn simulate_changing(
    platform: &Platform,
    truth: &[Worker],
    plan: &Plan,
    cfg: Config,
    kills: &[Kill],
    change: Option<Change>,
) -> Run {
    let mut machine = BatchMachine::new(platform.clone(), plan, cfg).expect("machine");
    let p = platform.len();
    let mut sim = Sim {
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
        open: HashMap::new(),
        transfers: Vec::new(),
        stored: vec![0; plan.load as usize],
        held: vec![0; p],
        max_held: vec![0; p],
    };
    let tick = 0.05;
    let (mut now, mut next_tick) = (0.0, tick);
    let mut commands = machine.start(0.0);
    let mut steps = 0;
    loop {
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

fn cfg() -> Config {
    Config {
        max_chunk: usize::MAX,
        straggler: None,
        stall_timeout: 1e9,
        self_schedule: None,
        liveness: 1.0,
        adapt: false,
    }
}

fn platform() -> Platform {
    Platform::new(vec![
        Worker::new("a", 0.010, 0.20, 0.005),
        Worker::new("b", 0.020, 0.10, 0.010),
        Worker::new("c", 0.015, 0.40, 0.0075),
        Worker::new("d", 0.200, 0.05, 0.100),
    ])
    .expect("valid")
}

/// Done, every product stored exactly once, one transfer at a time.
fn check_complete(run: &Run, what: &str) {
    check_stored_once(run, what);
    check_one_port(&run.transfers, what);
}

fn check_stored_once(run: &Run, what: &str) {
    assert_eq!(run.status, Status::Done, "{what}");
    if let Some(g) = run.stored.iter().position(|&n| n != 1) {
        panic!("{what}: product {g} stored {} times", run.stored[g]);
    }
}

fn check_one_port(transfers: &[(f64, f64, bool, usize)], what: &str) {
    let mut t = transfers.to_vec();
    t.sort_by(|a, b| a.0.total_cmp(&b.0));
    for pair in t.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1 - 1e-9,
            "{what}: transfers overlap: {:?} and {:?}",
            pair[0],
            pair[1]
        );
    }
}

#[test]
fn simulated_run_reproduces_the_planned_timeline() {
    let p = platform();
    for strategy in [
        Strategy::Fifo,
        Strategy::Lifo,
        Strategy::IncC,
        Strategy::IncW,
        Strategy::Best,
    ] {
        for load in [1u64, 3, 17, 200, 1000] {
            let pl = plan(&p, &Request::new(load, strategy)).expect("plans");
            let run = simulate(&p, p.workers(), &pl, cfg(), &[]);
            let what = format!("{strategy} M={load}");
            check_complete(&run, &what);
            let want = pl.makespan();
            assert!((run.end - want).abs() <= 1e-9 * want, "{what}: {} vs {want}", run.end);
            assert!((run.measured.makespan - want).abs() <= 1e-9 * want, "{what}");
            // Worker by worker, the measured phases are the planned ones.
            for (w, t) in pl.integer.workers.iter().enumerate() {
                if pl.loads[w] > 0 {
                    let m = run.measured.workers[w];
                    assert!((m.send_end - t.send_end).abs() <= 1e-9 * want, "{what} worker {w}");
                    assert!((m.return_end - t.return_end).abs() <= 1e-9 * want, "{what} worker {w}");
                }
            }
            // Sends and returns in the planned orders (one round; `best`
            // may choose several, checked transfer by transfer below).
            if pl.rounds.is_some() {
                assert_eq!(strategy, Strategy::Best);
                continue;
            }
            let order = |send: bool| {
                let mut v: Vec<usize> = run.transfers.iter().filter(|x| x.2 == send).map(|x| x.3).collect();
                v.dedup();
                v
            };
            assert_eq!(order(true), pl.send_order(), "{what}");
            assert_eq!(order(false), pl.return_order(), "{what}");
        }
    }
}

#[test]
fn chunking_never_finishes_later() {
    let p = platform();
    let pl = plan(&p, &Request::new(500, Strategy::Fifo)).expect("plans");
    for max_chunk in [1, 7, 50] {
        let run = simulate(&p, p.workers(), &pl, Config { max_chunk, ..cfg() }, &[]);
        check_complete(&run, &format!("chunks of {max_chunk}"));
        assert!(run.end <= pl.makespan() * (1.0 + 1e-9));
    }
}

#[test]
fn two_ports_overlap_sends_and_returns() {
    let p = platform();
    let req = Request {
        load: 400,
        strategy: Strategy::Fifo,
        ports: Ports::Two,
        rounding: Rounding::Refined,
    };
    let pl = plan(&p, &req).expect("plans");
    let run = simulate(&p, p.workers(), &pl, cfg(), &[]);
    assert_eq!(run.status, Status::Done);
    assert!((run.end - pl.makespan()).abs() <= 1e-9 * pl.makespan());
    // Never two sends or two returns at once.
    for is_send in [true, false] {
        let t: Vec<_> = run.transfers.iter().copied().filter(|x| x.2 == is_send).collect();
        check_one_port(&t, if is_send { "sends" } else { "returns" });
    }
}

#[test]
fn a_worker_lost_at_any_stage_has_its_products_redone_once() {
    let p = platform();
    for strategy in [Strategy::Fifo, Strategy::Lifo, Strategy::IncW] {
        let pl = plan(&p, &Request::new(300, strategy)).expect("plans");
        for victim in pl.send_order() {
            for stage in [Stage::Sending, Stage::Computing, Stage::AwaitingGrant, Stage::Returning] {
                for (max_chunk, nth) in [(usize::MAX, 0), (40, 0), (40, 1)] {
                    if pl.loads[victim] as usize <= nth * max_chunk.min(1 << 20) {
                        continue; // it has no such chunk
                    }
                    let kill = Kill {
                        worker: victim,
                        stage,
                        nth,
                    };
                    let run = simulate(&p, p.workers(), &pl, Config { max_chunk, ..cfg() }, &[kill]);
                    let what = format!("{strategy} {kill:?} chunks of {max_chunk}");
                    check_complete(&run, &what);
                    let f = &run.measured.failures;
                    assert_eq!(f.len(), 1, "{what}: one loss recorded");
                    assert_eq!(f[0].worker, victim);
                    assert!(f[0].products_lost > 0, "{what}: it held products");
                    assert!(!run.measured.replans.is_empty(), "{what}: a recovery round");
                    // Nothing the victim returned after its death was taken.
                    assert!(run.transfers.iter().all(|t| t.3 != victim || t.1 <= f[0].at), "{what}");
                }
            }
        }
    }
}

#[test]
fn recovery_starts_before_the_round_drains() {
    // Worker "a" dies while computing; the others are still computing
    // their own loads when it does. The recovery round's first send must
    // start at once, before the original round's last return.
    let p = platform();
    let pl = plan(&p, &Request::new(300, Strategy::Fifo)).expect("plans");
    let victim = pl.send_order()[0];
    let kill = kill(victim, Stage::Computing, 0);
    let run = simulate(&p, p.workers(), &pl, cfg(), &[kill]);
    check_complete(&run, "early recovery");
    let died = run.measured.failures[0].at;
    let replan = &run.measured.replans[0];
    assert_eq!(replan.at, died, "planned the moment the loss is known");
    let first_recovery_send = run
        .transfers
        .iter()
        .filter(|t| t.2 && t.0 >= died)
        .map(|t| t.0)
        .fold(f64::INFINITY, f64::min);
    let last_original_return = run
        .transfers
        .iter()
        .filter(|t| !t.2 && t.3 != victim)
        .map(|t| t.1)
        .fold(0.0, f64::max);
    assert!(first_recovery_send < last_original_return);
}

#[test]
fn two_losses_in_a_row_and_a_loss_during_recovery() {
    let p = platform();
    let pl = plan(&p, &Request::new(300, Strategy::Fifo)).expect("plans");
    let order = pl.send_order();
    let (first, second) = (order[0], order[1]);
    let cases = [
        // Two losses in a row, both in the original round.
        vec![kill(first, Stage::Computing, 0), kill(second, Stage::Sending, 0)],
        // The second worker dies while computing its recovery chunk (its
        // second chunk to be received).
        vec![kill(first, Stage::Computing, 0), kill(second, Stage::Computing, 1)],
    ];
    for kills in cases {
        let run = simulate(&p, p.workers(), &pl, cfg(), &kills);
        let what = format!("{kills:?}");
        check_complete(&run, &what);
        let lost: Vec<usize> = run.measured.failures.iter().map(|f| f.worker).collect();
        assert_eq!(lost, vec![first, second], "{what}");
    }
    // During recovery: the second loss comes after the first recovery round.
    let kills = [kill(first, Stage::Computing, 0), kill(second, Stage::Computing, 1)];
    let run = simulate(&p, p.workers(), &pl, cfg(), &kills);
    assert!(run.measured.replans[0].at < run.measured.failures[1].at);
    assert!(run.measured.replans.len() >= 2, "the second loss is recovered too");
}

#[test]
fn a_straggler_is_given_up_on_and_its_products_redone() {
    let p = platform();
    let pl = plan(&p, &Request::new(200, Strategy::Fifo)).expect("plans");
    let slow = pl.send_order()[1];
    let mut truth = p.workers().to_vec();
    truth[slow].w *= 20.0;
    let run = simulate(
        &p,
        &truth,
        &pl,
        Config {
            straggler: Some(2.0),
            ..cfg()
        },
        &[],
    );
    check_complete(&run, "straggler");
    let f = &run.measured.failures;
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].worker, slow);
    assert!(f[0].reason.starts_with("straggling"), "{}", f[0].reason);
    let due = pl.integer.workers[slow].compute_end * 2.0 + 1.0;
    assert!(
        f[0].at >= due && f[0].at <= due + 0.1,
        "given up at {} (due {due})",
        f[0].at
    );
    // It finished far earlier than waiting for the straggler would have.
    assert!(run.end < pl.integer.workers[slow].compute_end * 20.0);
}

#[test]
fn every_worker_lost_fails_and_says_how_much_is_missing() {
    let p = platform();
    let pl = plan(&p, &Request::new(100, Strategy::Lifo)).expect("plans");
    let kills: Vec<Kill> = pl
        .send_order()
        .iter()
        .map(|&w| kill(w, Stage::AwaitingGrant, 0))
        .collect();
    let run = simulate(&p, p.workers(), &pl, cfg(), &kills);
    match run.status {
        Status::Failed(why) => assert!(why.starts_with("every worker was lost"), "{why}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert!(run.stored.iter().all(|&n| n <= 1));
}

#[test]
fn recovery_respects_what_survivors_can_hold() {
    // Each worker holds at most 40 products at once, and the survivors are
    // nearly full when one is lost: a recovery round must fit in what they
    // have left.
    let workers = platform()
        .workers()
        .iter()
        .map(|w| w.clone().with_max_load(40))
        .collect();
    let p = Platform::new(workers).expect("valid");
    let pl = plan(&p, &Request::new(120, Strategy::Fifo)).expect("plans");
    let victim = pl.send_order()[0];
    let kill = kill(victim, Stage::AwaitingGrant, 0);
    let run = simulate(&p, p.workers(), &pl, cfg(), &[kill]);
    check_complete(&run, "bounded recovery");
    assert!(
        run.max_held.iter().all(|&h| h <= 40),
        "held at once: {:?}",
        run.max_held
    );
    let replanned: usize = run.measured.replans.iter().map(|r| r.products).sum();
    assert_eq!(replanned, run.measured.failures[0].products_lost);
}

#[test]
fn a_protocol_violation_loses_the_worker_not_the_batch() {
    let p = platform();
    let pl = plan(&p, &Request::new(40, Strategy::Fifo)).expect("plans");
    let mut m = BatchMachine::new(p.clone(), &pl, cfg()).expect("machine");
    let first = m.start(0.0);
    let Some(Command::Assign { worker, chunk, .. }) = first.first().cloned() else {
        panic!("the first command is a send: {first:?}")
    };
    // Results before it was even received.
    let out = m.on_event(worker, Input::Results(chunk), 0.1);
    assert!(out.contains(&Command::Release { worker, cancel: false }), "{out:?}");
    assert_eq!(m.status(), Status::Running);
    assert!(m.expected(worker, chunk).is_none(), "nothing more is taken from it");
    // Events of a lost worker are ignored.
    assert!(m.on_event(worker, Input::Received(chunk), 0.2).is_empty());
    // An unknown chunk is a violation too.
    let other = (0..4)
        .find(|&w| w != worker && pl.loads[w] > 0)
        .expect("another worker");
    let out = m.on_event(other, Input::Ready(ChunkId(999), 0.0), 0.3);
    assert!(out.contains(&Command::Release {
        worker: other,
        cancel: false
    }));
}

#[test]
fn a_stall_fails_the_batch() {
    let p = platform();
    let pl = plan(&p, &Request::new(10, Strategy::Fifo)).expect("plans");
    let mut m = BatchMachine::new(
        p,
        &pl,
        Config {
            stall_timeout: 5.0,
            ..cfg()
        },
    )
    .expect("machine");
    m.start(0.0);
    m.on_tick(4.0);
    assert_eq!(m.status(), Status::Running);
    m.on_tick(5.5);
    assert!(matches!(m.status(), Status::Failed(w) if w.contains("no worker made progress")));
}

mod on_demand;
mod rounds;
