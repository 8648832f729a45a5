//! The executor against a simulated platform: every command and reply goes
//! through the real codec, and the simulated run must reproduce the
//! planner's timeline (an independent computation of the same schedule).

use super::*;
use bytes::BytesMut;
use dls_lp::{plan, Platform, Request, Rounding, Strategy, Worker};
use dls_protocol::{frame, Frame, FromWorker, JobId, ToWorker};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Through the codec and back; the message must survive unchanged.
fn wire<M>(f: Frame<M>) -> Frame<M>
where
    M: serde::Serialize + serde::de::DeserializeOwned + dls_protocol::Payload + PartialEq + std::fmt::Debug + Clone,
{
    let mut buf = BytesMut::new();
    frame::encode(&f, &mut buf).expect("encodes");
    let back = frame::decode::<M>(&mut buf, 1 << 30).expect("decodes").expect("whole");
    assert_eq!(back, f);
    assert!(buf.is_empty(), "no stray bytes");
    back
}

#[derive(Debug, PartialEq)]
struct Timed(f64, u64, Event);
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

/// The simulated worker's side of an Assign sent at `now`: the chunk arrives
/// after its transfer, and is computed once the worker is free. Returns the
/// arrival time.
fn worker_takes(
    queue: &mut BinaryHeap<Timed>,
    seq: &mut u64,
    now: f64,
    wk: &[Worker],
    ch: &Chunk,
    free: &mut [f64],
) -> f64 {
    let w = ch.worker;
    let got = now + ch.len as f64 * wk[w].c;
    *seq += 1;
    queue.push(Timed(
        got,
        *seq,
        Event::Received {
            worker: w,
            chunk: ch.id,
        },
    ));
    let done = got.max(free[w]) + ch.len as f64 * wk[w].w;
    free[w] = done;
    *seq += 1;
    queue.push(Timed(
        done,
        *seq,
        Event::Ready {
            worker: w,
            chunk: ch.id,
        },
    ));
    got
}

struct Run {
    makespan: f64,
    /// (start, end, is_send, worker) of every transfer.
    transfers: Vec<(f64, f64, bool, usize)>,
    /// Chunks whose results arrived, and chunks handed back as lost.
    returned: Vec<Chunk>,
    lost: Vec<Chunk>,
    all: Vec<Chunk>,
}

fn simulate(platform: &Platform, ports: Ports, send: &[usize], ret: &[usize], loads: &[u64], max_chunk: usize) -> Run {
    simulate_with_loss(platform, ports, send, ret, loads, max_chunk, None)
}

/// Simulate the platform (n = 1 products, so payloads stay tiny on the
/// wire). `kill`: lose this worker after that many events.
fn simulate_with_loss(
    platform: &Platform,
    ports: Ports,
    send: &[usize],
    ret: &[usize],
    loads: &[u64],
    max_chunk: usize,
    kill: Option<(usize, usize)>,
) -> Run {
    let wk = platform.workers();
    let mut ex = Executor::new(ports, send, ret, chunks(send, loads, max_chunk));
    let job = JobId(7);
    let mut queue = BinaryHeap::new();
    let mut seq = 0u64;
    let mut compute_free = vec![0.0f64; wk.len()];
    let mut starts: std::collections::HashMap<(usize, ChunkId, bool), f64> = Default::default();
    let mut transfers = Vec::new();
    let mut now = 0.0;
    let all: Vec<Chunk> = ex.chunks().iter().flatten().copied().collect();
    let (mut returned, mut lost) = (Vec::new(), Vec::new());
    let mut dead: Option<usize> = None;
    let mut pending = ex.start();
    let mut guard = 0;
    loop {
        for cmd in pending.drain(..) {
            match cmd {
                Command::Assign(ch) => {
                    let msg = ToWorker::Assign {
                        job,
                        chunk: ch.id,
                        n: 1,
                        k: ch.len as u32,
                    };
                    let f = wire(Frame::with_payload(msg, vec![1.0; 2 * ch.len]));
                    assert!(matches!(f.msg, ToWorker::Assign { .. }));
                    starts.insert((ch.worker, ch.id, true), now);
                    worker_takes(&mut queue, &mut seq, now, wk, &ch, &mut compute_free);
                }
                Command::Grant { worker, chunk } => {
                    wire(Frame::new(ToWorker::Grant { job, chunk }));
                    let len = ex.chunks()[worker]
                        .iter()
                        .find(|c| c.id == chunk)
                        .expect("known chunk")
                        .len;
                    starts.insert((worker, chunk, false), now);
                    seq += 1;
                    queue.push(Timed(
                        now + len as f64 * wk[worker].d,
                        seq,
                        Event::Results { worker, chunk },
                    ));
                }
            }
        }
        if let Some((w, after)) = kill {
            if guard == after && dead.is_none() {
                dead = Some(w);
                let (gone, cmds) = ex.lose(w);
                lost = gone;
                pending = cmds;
                // The dead worker's open transfers never end.
                starts.retain(|k, _| k.0 != w);
                continue;
            }
        }
        let Some(Timed(t, _, ev)) = queue.pop() else { break };
        let from = match ev {
            Event::Received { worker, .. } | Event::Ready { worker, .. } | Event::Results { worker, .. } => worker,
        };
        if Some(from) == dead {
            guard += 1;
            continue;
        }
        now = t;
        // The worker's replies cross the wire too.
        match ev {
            Event::Received { worker, chunk } => {
                wire(Frame::new(FromWorker::Received { job, chunk }));
                transfers.push((starts[&(worker, chunk, true)], t, true, worker));
            }
            Event::Ready { chunk, .. } => {
                wire(Frame::new(FromWorker::Ready {
                    job,
                    chunk,
                    compute_secs: 0.0,
                }));
            }
            Event::Results { worker, chunk } => {
                let len = ex.chunks()[worker].iter().find(|c| c.id == chunk).expect("known").len;
                wire(Frame::with_payload(
                    FromWorker::Results {
                        job,
                        chunk,
                        n: 1,
                        k: len as u32,
                    },
                    vec![0.5; len],
                ));
                transfers.push((starts[&(worker, chunk, false)], t, false, worker));
                returned.push(*ex.chunks()[worker].iter().find(|c| c.id == chunk).expect("known"));
            }
        }
        pending = ex.on_event(ev).expect("the simulated worker follows the protocol");
        guard += 1;
        assert!(guard < 1_000_000);
    }
    assert!(
        ex.done(),
        "the schedule ran to its end (kill {kill:?}, dead {dead:?}, events {guard})"
    );
    Run {
        makespan: now,
        transfers,
        returned,
        lost,
        all,
    }
}

fn check_one_port(run: &Run, send: &[usize], ret: &[usize], loads: &[u64]) {
    let mut t = run.transfers.clone();
    t.sort_by(|a, b| a.0.total_cmp(&b.0));
    for pair in t.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1 - 1e-12,
            "transfers overlap: {:?} and {:?}",
            pair[0],
            pair[1]
        );
    }
    let order = |is_send: bool| {
        let mut v: Vec<usize> = t.iter().filter(|x| x.2 == is_send).map(|x| x.3).collect();
        v.dedup();
        v
    };
    let enrolled = |o: &[usize]| o.iter().copied().filter(|&w| loads[w] > 0).collect::<Vec<_>>();
    assert_eq!(order(true), enrolled(send));
    assert_eq!(order(false), enrolled(ret));
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
            let (send, ret) = (pl.scenario.send_order.clone(), pl.scenario.return_order.clone());
            let run = simulate(&p, Ports::One, &send, &ret, &pl.loads, usize::MAX);
            check_one_port(&run, &send, &ret, &pl.loads);
            let want = pl.makespan();
            assert!(
                (run.makespan - want).abs() <= 1e-9 * want,
                "{strategy} M={load}: {} vs {want}",
                run.makespan
            );
        }
    }
}

#[test]
fn chunking_never_finishes_later() {
    let p = platform();
    let pl = plan(&p, &Request::new(500, Strategy::Fifo)).expect("plans");
    let (send, ret) = (pl.scenario.send_order.clone(), pl.scenario.return_order.clone());
    for max_chunk in [1, 7, 50] {
        let run = simulate(&p, Ports::One, &send, &ret, &pl.loads, max_chunk);
        check_one_port(&run, &send, &ret, &pl.loads);
        assert!(run.makespan <= pl.makespan() * (1.0 + 1e-9));
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
    let (send, ret) = (pl.scenario.send_order.clone(), pl.scenario.return_order.clone());
    let run = simulate(&p, Ports::Two, &send, &ret, &pl.loads, usize::MAX);
    assert!((run.makespan - pl.makespan()).abs() <= 1e-9 * pl.makespan());
    // Never two sends or two returns at once.
    for is_send in [true, false] {
        let mut t: Vec<_> = run.transfers.iter().filter(|x| x.2 == is_send).collect();
        t.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in t.windows(2) {
            assert!(pair[1].0 >= pair[0].1 - 1e-12);
        }
    }
}

#[test]
fn chunks_cover_the_batch_once_in_send_order() {
    let c = chunks(&[2, 0, 1], &[5, 0, 3], 2); // worker 0: 5 units, worker 2: 3
    let flat: Vec<(usize, usize, usize)> = c.iter().flatten().map(|c| (c.worker, c.start, c.len)).collect();
    assert_eq!(c[1].len(), 0);
    let mut covered: Vec<usize> = c.iter().flatten().flat_map(|c| c.start..c.start + c.len).collect();
    covered.sort_unstable();
    assert_eq!(covered, (0..8).collect::<Vec<_>>());
    // Worker 2 is sent first: it holds products 0..3.
    assert!(flat.contains(&(2, 0, 2)) && flat.contains(&(2, 2, 1)));
    let ids: std::collections::HashSet<_> = c.iter().flatten().map(|c| c.id).collect();
    assert_eq!(ids.len(), 5);
}

#[test]
fn protocol_violations_are_refused() {
    let mut ex = Executor::new(Ports::One, &[0, 1], &[0, 1], chunks(&[0, 1], &[2, 2], 10));
    let first = ex.start();
    assert_eq!(first.len(), 1);
    let c0 = ex.chunks()[0][0].id;
    let c1 = ex.chunks()[1][0].id;
    // Ready before Received, Results before Grant, unknown chunks.
    assert!(ex.on_event(Event::Ready { worker: 0, chunk: c0 }).is_err());
    assert!(ex.on_event(Event::Results { worker: 0, chunk: c0 }).is_err());
    assert!(ex.on_event(Event::Received { worker: 1, chunk: c1 }).is_err());
    assert!(ex
        .on_event(Event::Received {
            worker: 0,
            chunk: ChunkId(99)
        })
        .is_err());
    assert!(ex.on_event(Event::Received { worker: 5, chunk: c0 }).is_err());
    // The right one is accepted and leads to the next send.
    assert_eq!(
        ex.on_event(Event::Received { worker: 0, chunk: c0 }).expect("ok"),
        vec![Command::Assign(ex.chunks()[1][0])]
    );
}

#[test]
fn a_lost_worker_hands_back_exactly_its_unreturned_chunks() {
    let p = platform();
    for strategy in [Strategy::Fifo, Strategy::Lifo, Strategy::IncW] {
        let pl = plan(&p, &Request::new(300, strategy)).expect("plans");
        let (send, ret) = (pl.scenario.send_order.clone(), pl.scenario.return_order.clone());
        let enrolled: Vec<usize> = send.iter().copied().filter(|&w| pl.loads[w] > 0).collect();
        let events = simulate(&p, Ports::One, &send, &ret, &pl.loads, 40).returned.len() * 3;
        for &victim in &enrolled {
            // Kill it at every stage of the schedule: during sends, computing, returns.
            for after in (0..=events).step_by(3) {
                let run = simulate_with_loss(&p, Ports::One, &send, &ret, &pl.loads, 40, Some((victim, after)));
                let key = |c: &Chunk| (c.worker, c.id);
                let mut got: Vec<_> = run.returned.iter().chain(&run.lost).map(key).collect();
                got.sort();
                let mut want: Vec<_> = run.all.iter().map(key).collect();
                want.sort();
                assert_eq!(
                    got, want,
                    "{strategy} victim {victim} after {after}: returned + lost = all, once each"
                );
                assert!(
                    run.lost.iter().all(|c| c.worker == victim),
                    "only the victim's chunks are lost"
                );
                assert!(run.returned.iter().all(|c| c.worker != victim || after > 0));
                let mut t = run.transfers.clone();
                t.sort_by(|a, b| a.0.total_cmp(&b.0));
                for pair in t.windows(2) {
                    assert!(pair[1].0 >= pair[0].1 - 1e-12, "transfers overlap after a loss");
                }
            }
        }
    }
}

/// Drive a self-scheduler on a simulated platform; returns (makespan,
/// transfers, returned chunk ids).
fn simulate_self(
    platform: &Platform,
    ports: Ports,
    m: usize,
    size: usize,
) -> (f64, Vec<(f64, f64, bool)>, Vec<ChunkId>) {
    let wk = platform.workers();
    let workers: Vec<usize> = (0..wk.len()).collect();
    let mut ex = SelfScheduler::new(ports, wk.len(), &workers, m, size, 0);
    let mut queue = BinaryHeap::new();
    let (mut seq, mut now) = (0u64, 0.0);
    let mut free = vec![0.0f64; wk.len()];
    let mut open = std::collections::HashMap::new();
    let (mut transfers, mut returned) = (Vec::new(), Vec::new());
    let mut pending = Schedule::start(&mut ex);
    loop {
        for cmd in pending.drain(..) {
            match cmd {
                Command::Assign(ch) => {
                    open.insert((ch.id, true), now);
                    worker_takes(&mut queue, &mut seq, now, wk, &ch, &mut free);
                }
                Command::Grant { worker, chunk } => {
                    let len = ex.chunks().iter().find(|c| c.id == chunk).expect("known").len;
                    open.insert((chunk, false), now);
                    seq += 1;
                    queue.push(Timed(
                        now + len as f64 * wk[worker].d,
                        seq,
                        Event::Results { worker, chunk },
                    ));
                }
            }
        }
        let Some(Timed(t, _, ev)) = queue.pop() else { break };
        now = t;
        match ev {
            Event::Received { chunk, .. } => transfers.push((open[&(chunk, true)], t, true)),
            Event::Results { chunk, .. } => {
                transfers.push((open[&(chunk, false)], t, false));
                returned.push(chunk);
            }
            Event::Ready { .. } => {}
        }
        pending = Schedule::on_event(&mut ex, ev).expect("follows the protocol");
    }
    assert!(Schedule::done(&ex));
    (now, transfers, returned)
}

#[test]
fn self_scheduling_returns_every_chunk_once_under_one_port() {
    let p = platform();
    for (m, size) in [(1usize, 1usize), (10, 3), (100, 7), (57, 57)] {
        let (_, transfers, mut returned) = simulate_self(&p, Ports::One, m, size);
        returned.sort();
        let want: Vec<ChunkId> = (0..m.div_ceil(size) as u64).map(ChunkId).collect();
        assert_eq!(returned, want, "m={m} size={size}");
        let mut t = transfers.clone();
        t.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in t.windows(2) {
            assert!(pair[1].0 >= pair[0].1 - 1e-12, "m={m} size={size}: transfers overlap");
        }
    }
    // Equal workers, negligible communication: the batch splits evenly, so
    // the makespan is (m / p) chunks of computing.
    let eq = Platform::new((0..4).map(|i| Worker::new(format!("e{i}"), 1e-9, 1.0, 1e-9)).collect()).expect("valid");
    let (makespan, _, _) = simulate_self(&eq, Ports::One, 40, 1);
    assert!((makespan - 10.0).abs() < 1e-6, "{makespan}");
}
