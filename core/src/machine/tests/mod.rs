//! The batch machine against a simulated platform. Every command and reply
//! goes through the real codec; simulated workers receive, compute in
//! arrival order and return when granted, at their true costs. Checks: the
//! simulated run reproduces the planner's timeline (an independent
//! computation of the same schedule), never two transfers at once, and every
//! product stored exactly once whatever is lost, and when.

use super::*;
use crate::sim::Faults;
pub(super) use crate::sim::{kill, At as Stage, Change, Kill, Run};
use dls_lp::{plan, Ports, Request, Rounding, Strategy, Worker};

/// Run `plan` on simulated workers whose true costs are `truth`, with
/// `kills`.
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
    let faults = Faults {
        kills: kills.to_vec(),
        change,
    };
    crate::sim::simulate(platform, truth, plan, cfg, &faults)
}

fn cfg() -> Config {
    Config::simulated()
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
    // Every family but `rounds` (tested on its own).
    for strategy in Strategy::ALL.into_iter().filter(|&s| s != Strategy::Rounds) {
        for load in [1u64, 3, 17, 200, 1000] {
            let pl = plan(&p, &Request::new(load, strategy)).expect("plans");
            let run = simulate(&p, p.workers(), &pl, cfg(), &[]);
            let what = format!("{strategy} M={load}");
            check_complete(&run, &what);
            let want = pl.makespan();
            assert!((run.end - want).abs() <= 1e-9 * want, "{what}: {} vs {want}", run.end);
            assert!((run.measured.makespan - want).abs() <= 1e-9 * want, "{what}");
            // Worker by worker, the measured phases are the planned ones.
            for (w, t) in pl.worker_times().iter().enumerate() {
                if pl.loads[w] > 0 {
                    let m = run.measured.workers[w];
                    assert!((m.send_end - t.send_end).abs() <= 1e-9 * want, "{what} worker {w}");
                    assert!((m.return_end - t.return_end).abs() <= 1e-9 * want, "{what} worker {w}");
                }
            }
            // Sends and returns in the planned orders (one round; `best`
            // may choose several, checked transfer by transfer below).
            if pl.multi_round() {
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
    let due = pl.worker_times()[slow].compute_end * 2.0 + 1.0;
    assert!(
        f[0].at >= due && f[0].at <= due + 0.1,
        "given up at {} (due {due})",
        f[0].at
    );
    // It finished far earlier than waiting for the straggler would have.
    assert!(run.end < pl.worker_times()[slow].compute_end * 20.0);
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

mod enrol;
mod on_demand;
mod opening;
mod rounds;
mod shared;
