//! The opening against what it must keep: on seeded random stars (one
//! port, two ports, a shared uplink) and plans of every family, the whole
//! plan gives each worker what the plan did, its first chunk is the
//! opening and nothing else is sent before the rest was ready; an opening
//! that is the plan's own first chunk leaves its timeline as it was.

use super::*;
use crate::plan::{plan, Request, Strategy};
use crate::rounding::Rounding;
use crate::uplink::Uplink;
use crate::Worker;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn star(r: &mut ChaCha8Rng, p: usize) -> Platform {
    let workers: Vec<Worker> = (0..p)
        .map(|i| {
            let c = r.random_range(0.001..0.02);
            let w = Worker::new(
                format!("w{i}"),
                c,
                c * r.random_range(0.5..8.0),
                c * r.random_range(0.1..1.0),
            );
            w.with_max_load(r.random_range(200..5000))
        })
        .collect();
    Platform::new(workers).expect("valid star")
}

fn ports_of(r: &mut ChaCha8Rng, platform: &Platform, k: u64) -> Ports {
    match k % 3 {
        0 => Ports::One,
        1 => Ports::Two,
        _ => {
            let fastest = platform.workers().iter().map(|w| w.c).fold(f64::INFINITY, f64::min);
            let carry = r.random_range(1.2..3.0);
            Ports::Shared(Uplink::new(fastest / carry, fastest / (2.0 * carry), true).expect("valid"))
        }
    }
}

/// The plans the cases cover: (platform, plan), with one of each family.
fn cases() -> Vec<(Platform, Plan)> {
    let mut out = Vec::new();
    for seed in 0..36u64 {
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        let p = 2 + (seed as usize % 7);
        let platform = star(&mut r, p);
        let ports = ports_of(&mut r, &platform, seed);
        let platform = match ports {
            Ports::Shared(u) => platform.with_uplink(Some(u)),
            _ => platform,
        };
        let strategy = [Strategy::Best, Strategy::Rounds, Strategy::Fifo, Strategy::Lifo][seed as usize % 4];
        let req = Request {
            load: r.random_range(40..3000),
            strategy,
            ports,
            rounding: Rounding::Refined,
        };
        out.push((platform.clone(), plan(&platform, &req).expect("plans")));
    }
    out
}

#[test]
fn the_whole_keeps_the_plans_loads_and_opens_with_the_opening() {
    let mut moved = 0;
    for (platform, plan) in cases() {
        let opening = choose(&platform, plan.ports, plan.load).expect("an opening");
        assert!(opening.units >= 1 && opening.units <= plan.load / 2);
        for release in [0.0, 0.01, 0.3 * plan.makespan()] {
            let (whole, rest) = split(&platform, &plan, opening, release);
            assert_eq!(whole.loads, plan.loads, "every worker keeps its products");
            assert_eq!(whole.load, plan.load);
            assert_eq!(rest.load + opening.units, plan.load);
            for (w, (&a, &b)) in rest.loads.iter().zip(&plan.loads).enumerate() {
                let s = if w == opening.worker { opening.units } else { 0 };
                assert_eq!(
                    a + s,
                    b,
                    "worker {w}: the rest has the plan's products but the opening's"
                );
            }
            let seq = &whole.sequence;
            assert_eq!(seq.ops[0], PortOp::Send(0), "the opening goes first");
            assert_eq!(
                (seq.chunks[0].worker, seq.chunks[0].units),
                (opening.worker, opening.units)
            );
            assert_eq!(
                seq.ops.len(),
                2 * seq.chunks.len(),
                "every chunk sent and returned once"
            );
            assert_eq!(
                rest.sequence.chunks[..],
                seq.chunks[1..],
                "the rest runs the whole's later chunks"
            );
            for (c, t) in seq.times.iter().enumerate().skip(1) {
                assert!(
                    t.send_start >= release - 1e-12,
                    "chunk {c} sent at {} before {release}",
                    t.send_start
                );
            }
            assert!(whole.makespan() >= rest.makespan() - 1e-9 || release == 0.0);
            moved += usize::from((whole.makespan() - plan.makespan()).abs() > 1e-9);
        }
    }
    assert!(
        moved > 0,
        "openings that are not a plan's first chunk move its timeline"
    );
}

/// An opening that is exactly the plan's first chunk, ready at once,
/// changes nothing: the whole is the plan's own sequence, timed alike.
#[test]
fn an_opening_equal_to_the_first_chunk_changes_nothing() {
    let mut checked = 0;
    for (platform, plan) in cases() {
        let seq = &plan.sequence;
        let PortOp::Send(first) = seq.ops[0] else {
            panic!("a plan starts with a send")
        };
        let opening = Opening {
            worker: seq.chunks[first].worker,
            units: seq.chunks[first].units,
        };
        // Only when the worker's first return is that chunk's (it is:
        // each worker computes and returns in arrival order).
        let (whole, _) = split(&platform, &plan, opening, 0.0);
        let rel = (whole.makespan() - plan.makespan()).abs() / plan.makespan();
        assert!(rel < 1e-12, "{} against {}", whole.makespan(), plan.makespan());
        let mut a: Vec<f64> = whole.sequence.times.iter().map(|t| t.return_end).collect();
        let mut b: Vec<f64> = seq.times.iter().map(|t| t.return_end).collect();
        a.sort_by(f64::total_cmp);
        b.sort_by(f64::total_cmp);
        assert_eq!(a, b, "the same returns at the same times");
        checked += 1;
    }
    assert!(checked >= 30);
}

/// Releasing the rest later never lets it end earlier.
#[test]
fn a_later_rest_never_ends_earlier() {
    for (platform, plan) in cases() {
        let opening = choose(&platform, plan.ports, plan.load).expect("an opening");
        let (now, _) = split(&platform, &plan, opening, 0.0);
        let late = 0.2 * plan.makespan();
        let (later, _) = split(&platform, &plan, opening, late);
        assert!(later.makespan() >= now.makespan() - 1e-9);
        assert!(
            later.makespan() >= late,
            "nothing but the opening runs before the rest is ready"
        );
    }
}

#[test]
fn no_opening_for_a_single_product() {
    let mut r = ChaCha8Rng::seed_from_u64(7);
    let platform = star(&mut r, 3);
    assert_eq!(choose(&platform, Ports::One, 1), None);
    let o = choose(&platform, Ports::One, 2).expect("two products open with one");
    assert_eq!(o.units, 1);
}
