//! Multi-round plans: the sequence is sound (every chunk sent once, then
//! returned once, the load covered), the earliest execution is recomputed
//! here by an independent event replay, memory bounds hold at every
//! instant, no plan beats the steady-state bound, and `rounds` never
//! predicts worse than the best one-round plan.

mod common;
use common::*;
use dls_lp::sequence::{PortOp, Sequence};
use dls_lp::{plan, steady_state, Latency, Platform, Ports, Request, Strategy, Worker};

/// Replay the sequence strictly in order: a port free time, each worker's
/// compute queue; returns each chunk's return end. (No gap filled: every
/// plan's own timeline must be at least this early.) With two lanes a
/// send waits for its worker's earlier returns, as in [`filled`].
fn strict(p: &Platform, r: &Sequence, ports: Ports) -> Vec<f64> {
    let tm = settle(r, ports, |release| strict_once(p, r, ports, release));
    tm.iter().map(|t| t[4]).collect()
}

/// One strict replay, sends no earlier than `release`: each chunk's
/// return end (the other times unused).
fn strict_once(p: &Platform, r: &Sequence, ports: Ports, release: &[f64]) -> Vec<[f64; 5]> {
    let wk = p.workers();
    let n = r.chunks.len();
    let (mut computed, mut returned) = (vec![f64::NAN; n], vec![[f64::NAN; 5]; n]);
    let mut worker_free = vec![0.0f64; wk.len()];
    let mut port = [0.0f64; 2];
    for (l, lane) in lanes(r, ports).iter().enumerate() {
        for op in lane {
            match *op {
                PortOp::Send(j) => {
                    let (c, x) = (r.chunks[j], &wk[r.chunks[j].worker]);
                    port[l] = port[l].max(release[j]) + x.latency.send + x.c * c.units as f64;
                    worker_free[c.worker] =
                        port[l].max(worker_free[c.worker]) + x.latency.compute + x.w * c.units as f64;
                    computed[j] = worker_free[c.worker];
                }
                PortOp::Return(j) => {
                    let (c, x) = (r.chunks[j], &wk[r.chunks[j].worker]);
                    assert!(!computed[j].is_nan(), "chunk {j} returned before it was sent");
                    port[l] = port[l].max(computed[j]) + x.latency.ret + x.d * c.units as f64;
                    returned[j][4] = port[l];
                }
            }
        }
    }
    returned
}

fn lanes(r: &Sequence, ports: Ports) -> Vec<Vec<PortOp>> {
    if ports.one_lane() {
        vec![r.ops.clone()]
    } else {
        let (s, t) = r.ops.iter().partition(|o| matches!(o, PortOp::Send(_)));
        vec![s, t]
    }
}

/// Replay the sequence with its gaps filled, by brute force: whenever the
/// port is free, scan every transfer not yet made; the head is the first,
/// and when it is a return still computing, the transfers that are their
/// worker's next one in the lane and could end before the head's chunk is
/// computed compete: the earliest to be ready goes (ties: the first in the
/// lane). Returns every chunk's times (send start, send end, compute end,
/// return start, return end).
///
/// With two lanes, a send also waits until its worker's returns that come
/// before it in the sequence are over (what the worker holds stays what
/// the sequence lets it): the lanes are replayed again with the return
/// ends of the last replay as release times, until nothing moves.
fn filled(p: &Platform, r: &Sequence, ports: Ports) -> Vec<[f64; 5]> {
    settle(r, ports, |release| filled_once(p, r, ports, release))
}

/// Replay `once` with release times (when each chunk may be sent) from
/// its own return ends, until they stop moving: with two lanes, a send
/// waits for its worker's returns planned before it.
fn settle(r: &Sequence, ports: Ports, once: impl Fn(&[f64]) -> Vec<[f64; 5]>) -> Vec<[f64; 5]> {
    let mut release = vec![0.0f64; r.chunks.len()];
    for _ in 0..200 {
        let tm = once(&release);
        // The last return of the same worker before each send.
        let p = r.chunks.iter().map(|c| c.worker + 1).max().unwrap_or(0);
        let mut last: Vec<Option<usize>> = vec![None; p];
        let mut next = vec![0.0f64; r.chunks.len()];
        for op in &r.ops {
            match *op {
                PortOp::Send(j) => next[j] = last[r.chunks[j].worker].map_or(0.0, |x| tm[x][4]),
                PortOp::Return(j) => last[r.chunks[j].worker] = Some(j),
            }
        }
        if ports.one_lane() || next == release {
            return tm;
        }
        release = next;
    }
    panic!("the release times never settled");
}

fn filled_once(p: &Platform, r: &Sequence, ports: Ports, release: &[f64]) -> Vec<[f64; 5]> {
    let wk = p.workers();
    let mut tm = vec![[f64::NAN; 5]; r.chunks.len()];
    let mut worker_free = vec![0.0f64; wk.len()];
    for lane in lanes(r, ports) {
        let mut done = vec![false; lane.len()];
        let mut port = 0.0f64;
        let dur = |op: PortOp| match op {
            PortOp::Send(j) => {
                wk[r.chunks[j].worker].latency.send + wk[r.chunks[j].worker].c * r.chunks[j].units as f64
            }
            PortOp::Return(j) => {
                wk[r.chunks[j].worker].latency.ret + wk[r.chunks[j].worker].d * r.chunks[j].units as f64
            }
        };
        let worker = |op: PortOp| match op {
            PortOp::Send(j) | PortOp::Return(j) => r.chunks[j].worker,
        };
        // Each worker's transfers in the lane, and how many are made.
        let mut mine: Vec<Vec<usize>> = vec![Vec::new(); wk.len()];
        for (i, &op) in lane.iter().enumerate() {
            mine[worker(op)].push(i);
        }
        let mut made = vec![0usize; wk.len()];
        let mut head = 0usize;
        loop {
            while head < lane.len() && done[head] {
                head += 1;
            }
            if head == lane.len() {
                break;
            }
            let ready = |op: PortOp, tm: &[[f64; 5]]| match op {
                PortOp::Send(j) => port.max(release[j]),
                PortOp::Return(j) => port.max(tm[j][2]),
            };
            let mut pick = (head, ready(lane[head], &tm));
            if let PortOp::Return(h) = lane[head] {
                let awaited = tm[h][2];
                let mut next: Vec<usize> = (0..wk.len()).filter_map(|w| mine[w].get(made[w]).copied()).collect();
                next.sort_unstable();
                for i in next.into_iter().filter(|&i| i > head) {
                    let at = ready(lane[i], &tm);
                    if at + dur(lane[i]) <= awaited + 1e-9 && at < pick.1 {
                        pick = (i, at);
                    }
                }
            }
            let (i, start) = pick;
            done[i] = true;
            made[worker(lane[i])] += 1;
            port = start + dur(lane[i]);
            match lane[i] {
                PortOp::Send(j) => {
                    let x = &wk[r.chunks[j].worker];
                    let w = r.chunks[j].worker;
                    worker_free[w] = port.max(worker_free[w]) + x.latency.compute + x.w * r.chunks[j].units as f64;
                    (tm[j][0], tm[j][1], tm[j][2]) = (start, port, worker_free[w]);
                }
                PortOp::Return(j) => (tm[j][3], tm[j][4]) = (start, port),
            }
        }
    }
    tm
}

/// Checks a plan; returns whether filling gaps made some chunk end earlier
/// than strictly in order.
fn check_sound(p: &Platform, r: &Sequence, load: u64, ports: Ports, what: &str) -> bool {
    let n = r.chunks.len();
    let (mut sends, mut returns) = (vec![0; n], vec![0; n]);
    let mut held = vec![0u64; p.len()];
    for op in &r.ops {
        match *op {
            PortOp::Send(j) => {
                assert_eq!(returns[j], 0, "{what}: chunk {j} sent after its return");
                sends[j] += 1;
                held[r.chunks[j].worker] += r.chunks[j].units;
                let w = &p.workers()[r.chunks[j].worker];
                if let Some(b) = w.max_load {
                    assert!(held[r.chunks[j].worker] <= b, "{what}: {} holds more than {b}", w.name);
                }
            }
            PortOp::Return(j) => {
                assert_eq!(sends[j], 1, "{what}: chunk {j} returned before it was sent");
                returns[j] += 1;
                held[r.chunks[j].worker] -= r.chunks[j].units;
            }
        }
    }
    assert!(sends.iter().chain(&returns).all(|&k| k == 1), "{what}: once each");
    assert_eq!(r.chunks.iter().map(|c| c.units).sum::<u64>(), load, "{what}");
    // The plan's timeline is the brute-force replay's, never later than
    // the strict one's, and no worker ever holds more than its memory.
    let tm = filled(p, r, ports);
    let late = strict(p, r, ports);
    for (j, (t, x)) in r.times.iter().zip(&tm).enumerate() {
        let mine = [t.send_start, t.send_end, t.compute_end, t.return_start, t.return_end];
        for (a, b) in mine.iter().zip(x) {
            assert_close(*a, *b, 1e-9, what);
        }
        assert!(
            t.return_end <= late[j] * (1.0 + 1e-12),
            "{what}: chunk {j} later than strictly in order"
        );
    }
    let m = tm.iter().map(|t| t[4]).fold(0.0, f64::max);
    assert_close(m, r.makespan, 1e-9, what);
    check_memory(p, r, &tm, what);
    r.times.iter().zip(&late).any(|(t, l)| t.return_end < l * (1.0 - 1e-9))
}

/// At every instant, what each worker holds (chunks whose send has started
/// and whose return has not ended) stays within its memory.
fn check_memory(p: &Platform, r: &Sequence, tm: &[[f64; 5]], what: &str) {
    for (w, x) in p.workers().iter().enumerate() {
        let Some(b) = x.max_load else { continue };
        let mut ev: Vec<(f64, i64)> = Vec::new();
        for (c, t) in r.chunks.iter().zip(tm) {
            if c.worker == w {
                ev.push((t[0], c.units as i64));
                ev.push((t[4], -(c.units as i64)));
            }
        }
        // Releases first at equal instants.
        ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut held = 0i64;
        for (_, d) in ev {
            held += d;
            assert!(held <= b as i64, "{what}: {} holds {held} > {b}", x.name);
        }
    }
}

#[test]
fn rounds_plans_are_sound_and_never_worse_than_one_round() {
    let mut filled_some = false;
    for seed in 0..40u64 {
        let mut rg = rng(4000 + seed);
        let p = 1 + (seed as usize % 8);
        let family = [Family::Bus, Family::Star(0.5), Family::MixedZ][seed as usize % 3];
        let platform = random_platform(&mut rg, p, family);
        for ports in [Ports::One, Ports::Two] {
            for load in [1u64, 7, 100, 2000] {
                let what = format!("seed {seed} p {p} {ports:?} M {load}");
                let req = Request {
                    ports,
                    ..Request::new(load, Strategy::Rounds)
                };
                let pl = plan(&platform, &req).expect("plans");
                assert!(pl.multi_round(), "a multi-round plan");
                let r = &pl.sequence;
                filled_some |= check_sound(&platform, r, load, ports, &what);
                assert_eq!(pl.loads.iter().sum::<u64>(), load);
                let bound = steady_state(&platform, ports).expect("bound").makespan_bound(load);
                assert!(pl.makespan() >= bound * (1.0 - 1e-9), "{what}: below the bound");
                for one in [Strategy::Fifo, Strategy::Lifo] {
                    let o = plan(&platform, &Request { strategy: one, ..req }).expect("plans");
                    assert!(pl.makespan() <= o.makespan() * (1.0 + 1e-9), "{what}: worse than {one}");
                }
            }
        }
    }
    assert!(filled_some, "no plan had a gap that a later transfer filled");
}

/// With per-message latencies (which the one-round predictions leave out),
/// `best` still never predicts worse than the one-round strategies it
/// weighs: a multi-round plan is taken only when its own prediction, with
/// latencies, is below theirs.
#[test]
fn best_never_predicts_worse_than_fifo_or_lifo_with_latencies() {
    for seed in 0..24u64 {
        let mut rg = rng(7000 + seed);
        // Few workers (every pair of orders is weighed) and more.
        let p = [1, 2, 3, 6, 7, 9][seed as usize % 6];
        let base = random_platform(
            &mut rg,
            p,
            [Family::Bus, Family::Star(0.5), Family::MixedZ][seed as usize % 3],
        );
        // Latencies from none to several units' worth.
        let scale = [0.0, 0.3, 3.0][seed as usize % 3];
        let workers = base
            .workers()
            .iter()
            .map(|w| Worker {
                latency: Latency {
                    send: scale * w.c,
                    compute: scale * w.w,
                    ret: scale * w.d,
                },
                ..w.clone()
            })
            .collect();
        let platform = Platform::new(workers).expect("platform");
        for load in [3u64, 400] {
            let best = plan(&platform, &Request::new(load, Strategy::Best)).expect("plans");
            for one in [Strategy::Fifo, Strategy::Lifo] {
                let o = plan(&platform, &Request::new(load, one)).expect("plans");
                assert!(
                    best.makespan() <= o.makespan() * (1.0 + 1e-9),
                    "seed {seed} M {load} latency ×{scale}: best {} > {one} {}",
                    best.makespan(),
                    o.makespan()
                );
            }
        }
    }
}

#[test]
fn many_rounds_approach_the_bound_and_latencies_limit_them() {
    // Four unequal workers, a large batch: rounds gets close to load / ρ*.
    let platform = Platform::new(vec![
        Worker::new("a", 0.010, 0.10, 0.005),
        Worker::new("b", 0.020, 0.08, 0.010),
        Worker::new("c", 0.015, 0.30, 0.008),
        Worker::new("d", 0.050, 0.05, 0.020),
    ])
    .expect("valid");
    let load = 2000;
    let bound = steady_state(&platform, Ports::One).expect("bound").makespan_bound(load);
    let r = plan(&platform, &Request::new(load, Strategy::Rounds)).expect("plans");
    let one = plan(&platform, &Request::new(load, Strategy::Lifo)).expect("plans");
    assert!(r.makespan() <= 1.05 * bound, "{} vs bound {bound}", r.makespan());
    assert!(one.makespan() > r.makespan());
    // A latency of a tenth of a second per message makes many rounds costly:
    // fewer rounds win.
    let slow: Vec<Worker> = platform
        .workers()
        .iter()
        .map(|w| {
            w.clone().with_latency(Latency {
                send: 0.1,
                compute: 0.0,
                ret: 0.1,
            })
        })
        .collect();
    let slow = Platform::new(slow).expect("valid");
    let rs = plan(&slow, &Request::new(load, Strategy::Rounds)).expect("plans");
    let count = |p: &dls_lp::Plan| p.sequence.count;
    assert!(
        count(&rs) < count(&r),
        "{} rounds with latencies, {} without",
        count(&rs),
        count(&r)
    );
    check_sound(&slow, &rs.sequence, load, Ports::One, "latencies");
}

#[test]
fn rounds_run_any_batch_whatever_the_memory() {
    // Each worker holds 10 units at once; the batch is 50 times that.
    let platform = Platform::new(
        (0..4)
            .map(|i| Worker::new(format!("w{i}"), 0.01 * (i + 1) as f64, 0.1, 0.005).with_max_load(10))
            .collect(),
    )
    .expect("valid");
    assert!(plan(&platform, &Request::new(2000, Strategy::Fifo)).is_err());
    let pl = plan(&platform, &Request::new(2000, Strategy::Rounds)).expect("plans");
    check_sound(&platform, &pl.sequence, 2000, Ports::One, "memory");
    // Two lanes: sends have a capacity of their own, and workers that
    // compute ten times slower than they receive would pile chunks up if
    // a send did not wait for the worker's earlier returns.
    let two = Request {
        ports: Ports::Two,
        ..Request::new(2000, Strategy::Rounds)
    };
    let pl = plan(&platform, &two).expect("plans");
    check_sound(&platform, &pl.sequence, 2000, Ports::Two, "memory, two ports");
    // Behind a full-duplex uplink that carries two links' worth: the
    // plan's own times keep every worker within its memory.
    let up = dls_lp::Uplink::new(0.01, 0.004, true).expect("valid");
    let shared = Request {
        ports: Ports::Shared(up),
        ..two
    };
    let pl = plan(&platform, &shared).expect("plans");
    let tm: Vec<[f64; 5]> = (pl.sequence.times.iter())
        .map(|t| [t.send_start, t.send_end, t.compute_end, t.return_start, t.return_end])
        .collect();
    check_memory(&platform, &pl.sequence, &tm, "memory, shared uplink");
}

/// A compute latency fitted from noise (the test bed's star 3: 43 ms on a
/// worker taking 126 ms a product) must not cost much when it is not
/// there, nor a real one when it is: the plan is weighed both ways and
/// loses little either way against the plan made for each.
#[test]
fn a_doubtful_latency_costs_little_either_way() {
    let workers = vec![
        Worker::new("w1", 0.00556, 0.02690, 0.00275),
        Worker::new("w2", 0.00347, 0.26005, 0.00173),
        Worker::new("w3", 0.00462, 0.12551, 0.00230),
        Worker::new("w4", 0.00395, 0.13177, 0.00197),
    ];
    let bare = Platform::new(workers.clone()).expect("valid");
    let mut with = workers;
    with[2].latency.compute = 0.0433;
    let with = Platform::new(with).expect("valid");
    let req = Request::new(200, Strategy::Rounds);
    let hedged = plan(&with, &req).expect("plans");
    assert!(hedged.multi_round());
    let r = &hedged.sequence;
    let (_, without) = dls_lp::sequence::execute(&bare, &r.chunks, &r.ops, Ports::One);
    let for_bare = plan(&bare, &req).expect("plans").makespan();
    // The plan for the latency, had it been believed alone: the best of the
    // same family weighed with it, at most the one-round plan.
    let one = plan(&with, &Request::new(200, Strategy::Fifo))
        .expect("plans")
        .makespan();
    assert!(hedged.makespan() <= one * (1.0 + 1e-9));
    assert!(
        without <= 1.03 * for_bare,
        "without the latency: {without} vs {for_bare}"
    );
    let bound = steady_state(&with, Ports::One).expect("bound").makespan_bound(200);
    assert!(
        hedged.makespan() <= 1.12 * bound,
        "with it: {} vs bound {bound}",
        hedged.makespan()
    );
}

/// Two workers alike in what they cost the port (within 1%), one
/// computing in 90% of its port time, the other in 10%: the port takes one
/// of them, and the plan takes the one with slack, whichever comes first.
#[test]
fn between_workers_alike_on_the_port_the_one_with_slack_is_enrolled() {
    for (first_w, second_cd) in [(0.9, 1.005), (0.1, 1.005), (0.9, 0.995)] {
        let c = 0.01;
        let slow = Worker::new("a", c * 0.5, first_w * c, c * 0.5);
        let other = Worker::new("b", 0.5 * c * second_cd, (1.0 - first_w) * c, 0.5 * c * second_cd);
        let platform = Platform::new(vec![slow, other]).expect("valid");
        let fast = if first_w < 0.5 { 0 } else { 1 };
        let ss = dls_lp::bound::preferring_slack(&platform, Ports::One).expect("shares");
        assert!(
            ss.alpha[fast] > 0.0 && ss.alpha[1 - fast] == 0.0,
            "{first_w}/{second_cd}: {:?}",
            ss.alpha
        );
        let pl = plan(&platform, &Request::new(1000, Strategy::Rounds)).expect("plans");
        // A single round, which keeps both busy, may predict earlier; the
        // periodic schedules are built on the worker with slack.
        if pl.multi_round() {
            assert!(
                pl.loads[fast] > pl.loads[1 - fast],
                "{first_w}/{second_cd}: {:?}",
                pl.loads
            );
        }
        let bound = steady_state(&platform, Ports::One).expect("bound").makespan_bound(1000);
        assert!(pl.makespan() >= bound * (1.0 - 1e-9));
        assert!(pl.makespan() <= bound * 1.06, "{} vs {bound}", pl.makespan());
    }
    // Beyond 1% apart, the cheaper link is taken.
    let a = Worker::new("a", 0.005, 0.009, 0.005);
    let b = Worker::new("b", 0.0052, 0.001, 0.0052);
    let platform = Platform::new(vec![a, b]).expect("valid");
    let ss = dls_lp::bound::preferring_slack(&platform, Ports::One).expect("shares");
    assert!(ss.alpha[0] > 0.0 && ss.alpha[1] == 0.0, "{:?}", ss.alpha);
}

/// Shares that prefer slack give up at most 1% of ρ*.
#[test]
fn preferring_slack_costs_at_most_a_percent_of_the_bound() {
    for seed in 0..60u64 {
        let mut r = rng(5100 + seed);
        let platform = seeded_platform(&mut r, seed, 8);
        let up = dls_lp::Uplink::new(0.02, 0.01, seed % 2 == 0).expect("valid");
        for ports in [Ports::One, Ports::Two, Ports::Shared(up)] {
            let best = steady_state(&platform, ports).expect("bound").throughput;
            let got = dls_lp::bound::preferring_slack(&platform, ports)
                .expect("shares")
                .throughput;
            assert!(
                got <= best * (1.0 + 1e-9) && got >= best * 0.99,
                "seed {seed} {ports:?}: {got} vs {best}"
            );
        }
    }
}

/// Without per-message latencies, `rounds` takes the candidate with the
/// fewest chunks among those predicted within its slack of the earliest
/// (`TUNING.slack`, `TUNING.shared_slack` behind a shared uplink). The earliest is what
/// the same search returns when a latency too small to matter turns the
/// choice off: the plan has no more chunks than that one and predicts
/// within the slack of it, and, on the switched star below, far fewer.
#[test]
fn of_plans_within_the_slack_the_fewest_chunks() {
    // The switched test bed's balanced star as calibrated (n = 256).
    let star = || {
        vec![
            Worker::new("a", 0.0714, 0.0328, 0.0341),
            Worker::new("b", 0.0423, 0.0187, 0.0216),
            Worker::new("c", 0.0259, 0.0076, 0.0130),
            Worker::new("d", 0.0212, 0.0072, 0.0097),
        ]
    };
    let up = dls_lp::Uplink::new(0.01915, 0.00899, true).expect("valid");
    let cases = [
        (star(), Ports::Shared(up), 300),
        (star(), Ports::One, 300),
        (star(), Ports::Two, 120),
    ];
    let mut fewer = 0;
    for (workers, ports, load) in cases {
        let req = Request {
            ports,
            ..Request::new(load, Strategy::Rounds)
        };
        let slack = plan(&Platform::new(workers.clone()).expect("valid"), &req).expect("plans");
        let tiny = Latency {
            send: 1e-15,
            compute: 0.0,
            ret: 0.0,
        };
        let earliest: Vec<Worker> = workers.into_iter().map(|w| w.with_latency(tiny)).collect();
        let earliest = plan(&Platform::new(earliest).expect("valid"), &req).expect("plans");
        let (s, e) = (&slack.sequence, &earliest.sequence);
        assert!(
            s.chunks.len() <= e.chunks.len(),
            "{ports:?}: {} vs {}",
            s.chunks.len(),
            e.chunks.len()
        );
        assert!(
            slack.makespan() <= (1.0 + dls_lp::rounds::slack(ports)) * earliest.makespan() + 1e-9,
            "{ports:?}: {} vs {}",
            slack.makespan(),
            earliest.makespan()
        );
        fewer += usize::from(2 * s.chunks.len() < e.chunks.len());
    }
    assert!(fewer >= 1, "the switched star's plan has half the chunks or fewer");
}
