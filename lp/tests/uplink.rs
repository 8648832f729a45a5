//! The steady-state bound behind a shared uplink (a switched network):
//! its closed form against the LP written constraint by constraint, and
//! its shares against every constraint recomputed from them.

mod common;
use common::*;
use dls_lp::bound;
use dls_lp::sequence::{execute, strict_makespan, PortOp, Sequence};
use dls_lp::{plan, Ports, Request, Strategy, Uplink};
use rand::Rng;

#[test]
fn the_uplink_bound_is_its_lp() {
    for seed in 0..200u64 {
        let mut r = rng(4_000 + seed);
        let platform = seeded_platform(&mut r, seed, 9);
        let wk = platform.workers();
        let p = wk.len();
        // Uplinks from far faster than any link to slower than all of them.
        let mean_c = wk.iter().map(|w| w.c).sum::<f64>() / p as f64;
        let uplink = Uplink {
            send: mean_c * r.random_range(0.01..3.0),
            ret: mean_c * r.random_range(0.01..3.0),
            duplex: seed % 2 == 0,
        };
        let closed = bound::steady_state_uplink(&platform, uplink);
        let lp = bound::lp_uplink(&platform, uplink).expect("LP");
        assert_close(
            closed.throughput,
            lp.throughput,
            1e-7,
            &format!("seed {seed}: closed form vs LP"),
        );
        // Every constraint, from the shares themselves.
        let eps = 1e-9;
        for (a, w) in closed.alpha.iter().zip(wk) {
            assert!(*a >= 0.0 && a * w.w <= 1.0 + eps && a * w.c <= 1.0 + eps && a * w.d <= 1.0 + eps);
        }
        let total: f64 = closed.alpha.iter().sum();
        assert_close(total, closed.throughput, 1e-12, "shares add up");
        if uplink.duplex {
            assert!(total * uplink.send <= 1.0 + eps && total * uplink.ret <= 1.0 + eps);
        } else {
            assert!(total * (uplink.send + uplink.ret) <= 1.0 + eps);
        }
    }
}

/// A star's own links carry transfers at once, so behind an uplink no
/// slower than them the bound is never below the one-port bound (where the
/// master takes part in one transfer at a time), and a full-duplex uplink
/// never bounds tighter than a half-duplex one.
#[test]
fn sharing_an_uplink_never_bounds_below_one_port() {
    for seed in 0..100u64 {
        let mut r = rng(5_000 + seed);
        let p = 1 + (seed as usize % 7);
        let platform = random_platform(&mut r, p, Family::Star(0.5));
        let wk = platform.workers();
        let fastest = |f: fn(&dls_lp::Worker) -> f64| wk.iter().map(f).fold(f64::INFINITY, f64::min);
        let half = Uplink {
            send: fastest(|w| w.c),
            ret: fastest(|w| w.d),
            duplex: false,
        };
        let full = Uplink { duplex: true, ..half };
        let one = bound::steady_state(&platform, Ports::One).expect("one port");
        let shared = bound::steady_state_uplink(&platform, half);
        let duplex = bound::steady_state_uplink(&platform, full);
        assert!(shared.throughput >= one.throughput * (1.0 - 1e-9), "seed {seed}");
        assert!(duplex.throughput >= shared.throughput * (1.0 - 1e-9), "seed {seed}");
    }
}

/// A random uplink for `platform`: from far faster than any link to
/// slower than all of them.
fn random_uplink(r: &mut rand_chacha::ChaCha8Rng, platform: &dls_lp::Platform, duplex: bool) -> Uplink {
    let wk = platform.workers();
    let mean = |f: fn(&dls_lp::Worker) -> f64| wk.iter().map(f).sum::<f64>() / wk.len() as f64;
    Uplink::new(
        mean(|w| w.c) * r.random_range(0.05..1.5),
        mean(|w| w.d).max(1e-3) * r.random_range(0.05..1.5),
        duplex,
    )
    .expect("valid uplink")
}

/// Everything a schedule behind a shared uplink must respect, checked on
/// its times alone: each transfer starts only with room for it on its
/// lane (all of its share, or `TUNING.room`) and lasts what the model says
/// (its link's time at the rate the transfers started before it leave,
/// recomputed by a sweep over the lane's instants), a
/// worker's transfers on a lane never overlap, each worker computes its
/// chunks one at a time in arrival order, a return starts after its chunk
/// is computed, and taken strictly, transfers start in lane order.
fn check_shared(platform: &dls_lp::Platform, seq: &Sequence, u: Uplink, what: &str) {
    let wk = platform.workers();
    let eps = 1e-9;
    // (lane, start, end, share, worker, position in the sequence)
    let mut spans = Vec::new();
    let pos_of = |op: PortOp| seq.ops.iter().position(|&o| o == op).expect("in the sequence");
    for (j, (c, t)) in seq.chunks.iter().zip(&seq.times).enumerate() {
        let w = &wk[c.worker];
        let n = c.units as f64;
        let per_send = w.c.max(u.send);
        let per_ret = w.d.max(u.ret);
        assert!(
            t.return_start >= t.compute_end - eps,
            "{what}: chunk {j} returned before computed"
        );
        let ret_lane = usize::from(u.duplex);
        let share = |up: f64, per: f64| if per > 0.0 { up / per } else { 0.0 };
        spans.push((
            0,
            t.send_start,
            t.send_end,
            share(u.send, per_send),
            c.worker,
            pos_of(PortOp::Send(j)),
            w.latency.send + per_send * n,
        ));
        spans.push((
            ret_lane,
            t.return_start,
            t.return_end,
            share(u.ret, per_ret),
            c.worker,
            pos_of(PortOp::Return(j)),
            w.latency.ret + per_ret * n,
        ));
    }
    for lane in 0..2 {
        let mut mine: Vec<_> = spans.iter().filter(|s| s.0 == lane).collect();
        mine.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.5.cmp(&b.5)));
        // Each started with room: all of its share, or TUNING.room below TUNING.fill.
        for (k, s) in mine.iter().enumerate() {
            let under_way: f64 = mine[..k].iter().filter(|o| o.2 > s.1 + eps).map(|o| o.3).sum();
            assert!(
                under_way + s.3 <= 1.0 + 1e-6 || under_way + s.3.min(dls_lp::TUNING.room) <= dls_lp::TUNING.fill + 1e-6,
                "{what}: a transfer of share {} started beside {under_way} at {}",
                s.3,
                s.1
            );
        }
        // The sweep: between two instants at which transfers start or end,
        // those under way run at their links' rates if their shares fit,
        // else at max-min fair parts of TUNING.cap (the level found by
        // bisection). Each must have done its own time's work, at its full
        // rate, exactly by its end, and the lane never carries more than
        // all of it.
        // With two lanes, a worker's return runs at its speed while
        // receiving (`Worker::return_speed_receiving`) while a send of its
        // own is under way: its sends' ends are instants too.
        let receiving = |w: usize, from: f64, to: f64| {
            lane == 1
                && spans
                    .iter()
                    .any(|o| o.0 == 0 && o.4 == w && o.1 <= from + eps && o.2 >= to - eps && o.2 > o.1)
        };
        let mut instants: Vec<f64> = mine.iter().flat_map(|s| [s.1, s.2]).collect();
        if lane == 1 {
            instants.extend(spans.iter().filter(|o| o.0 == 0).flat_map(|o| [o.1, o.2]));
        }
        instants.sort_by(f64::total_cmp);
        let mut work = vec![0.0; mine.len()];
        for w in instants.windows(2) {
            let (from, to) = (w[0], w[1]);
            if to <= from {
                continue;
            }
            let on: Vec<usize> = (0..mine.len())
                .filter(|&k| mine[k].1 <= from && mine[k].2 >= to)
                .collect();
            // What each asks of the lane: its share, a part of it where its
            // worker slows it.
            let speed = |k: usize| {
                let w = mine[k].4;
                if receiving(w, from, to) {
                    wk[w].return_speed_receiving()
                } else {
                    1.0
                }
            };
            let asked: Vec<f64> = on.iter().map(|&k| mine[k].3 * speed(k)).collect();
            let level = fair_level(&asked);
            let mut carried = 0.0;
            for (&k, &a) in on.iter().zip(&asked) {
                let (got, s) = (a.min(level), mine[k].3);
                carried += got;
                work[k] += if s > 0.0 { got / s } else { speed(k) } * (to - from);
            }
            assert!(carried <= 1.0 + 1e-6, "{what}: {carried} of the lane carried at {from}");
        }
        for (k, s) in mine.iter().enumerate() {
            assert_close(work[k], s.6, 1e-9, what);
        }
        for w in 0..wk.len() {
            let mut mine: Vec<_> = spans.iter().filter(|s| s.0 == lane && s.4 == w).collect();
            mine.sort_by_key(|s| s.5);
            for pair in mine.windows(2) {
                assert!(pair[1].1 >= pair[0].2 - eps, "{what}: worker {w}'s transfers overlap");
            }
        }
        if !seq.fill_gaps {
            let mut order: Vec<_> = spans.iter().filter(|s| s.0 == lane).collect();
            order.sort_by_key(|s| s.5);
            for pair in order.windows(2) {
                assert!(
                    pair[1].1 >= pair[0].1 - eps,
                    "{what}: a transfer started before the one ahead of it"
                );
            }
        }
    }
    // Each worker computes in arrival order, one chunk at a time.
    for (w, x) in wk.iter().enumerate() {
        let mut mine: Vec<_> = seq
            .chunks
            .iter()
            .zip(&seq.times)
            .filter(|(c, _)| c.worker == w)
            .collect();
        mine.sort_by(|a, b| a.1.send_end.total_cmp(&b.1.send_end));
        let mut free = 0.0f64;
        for (c, t) in mine {
            free = free.max(t.send_end) + x.latency.compute + x.w * c.units as f64;
            assert_close(t.compute_end, free, 1e-9, what);
        }
    }
}

/// The part of the lane each transfer under way may take, at most its
/// share: all of them if the shares fit, else the level at which the parts
/// add up to `TUNING.cap`, found by bisection.
fn fair_level(shares: &[f64]) -> f64 {
    if shares.iter().sum::<f64>() <= 1.0 + 1e-9 {
        return f64::INFINITY;
    }
    let carried = |level: f64| shares.iter().map(|s| s.min(level)).sum::<f64>();
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if carried(mid) < dls_lp::TUNING.cap {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// Links that each take most of the uplink: no two whole shares fit at
/// once, so every transfer beside another starts in the room left and
/// runs slower than its link. Sends one at a time would take at least
/// the load times the fastest link's cost; the plan ends earlier, and
/// near the bound (which lets them share all of the uplink freely) over
/// the share transfers that do not fit carry together.
#[test]
fn links_too_fast_to_fit_beside_each_other_share_what_is_left() {
    let platform = dls_lp::Platform::new(vec![
        dls_lp::Worker::new("a", 0.0125, 0.02, 0.004),
        dls_lp::Worker::new("b", 0.0143, 0.02, 0.004),
        dls_lp::Worker::new("c", 0.0167, 0.02, 0.004),
    ])
    .expect("valid");
    let u = Uplink::new(0.010, 0.004, true).expect("valid");
    let load = 1500;
    let bound = bound::steady_state_uplink(&platform, u).makespan_bound(load);
    let req = Request {
        ports: Ports::Shared(u),
        ..Request::new(load, Strategy::Rounds)
    };
    let pl = plan(&platform, &req).expect("plans");
    check_shared(&platform, &pl.sequence, u, "too fast to fit");
    let slowed = (pl.sequence.chunks.iter().zip(&pl.sequence.times))
        .filter(|(c, t)| {
            let w = &platform.workers()[c.worker];
            t.send_end - t.send_start > w.c * c.units as f64 * (1.0 + 1e-6)
        })
        .count();
    assert!(slowed > 0, "some send shared the uplink");
    let one_at_a_time = load as f64 * 0.0125;
    assert!(
        pl.makespan() >= bound && pl.makespan() < one_at_a_time && pl.makespan() <= 1.05 * bound / dls_lp::TUNING.cap,
        "{} against the bound {bound} and {one_at_a_time} one at a time",
        pl.makespan()
    );
}

#[test]
fn plans_behind_a_shared_uplink_respect_it_and_never_beat_its_bound() {
    for seed in 0..60u64 {
        let mut r = rng(6_000 + seed);
        let platform = seeded_platform(&mut r, seed, 8);
        let u = random_uplink(&mut r, &platform, seed % 2 == 0);
        let load = r.random_range(10..400);
        let bound = bound::steady_state_uplink(&platform, u).makespan_bound(load);
        for strategy in [Strategy::Fifo, Strategy::Lifo, Strategy::Rounds, Strategy::Best] {
            let req = Request {
                ports: Ports::Shared(u),
                ..Request::new(load, strategy)
            };
            let what = format!("seed {seed}, {strategy}, {u:?}");
            let pl = plan(&platform, &req).expect("plans");
            assert_eq!(pl.loads.iter().sum::<u64>(), load, "{what}");
            check_shared(&platform, &pl.sequence, u, &what);
            assert!(
                pl.makespan() >= bound * (1.0 - 1e-9),
                "{what}: {} below the bound {bound}",
                pl.makespan()
            );
            // Refilled from scratch, the sequence gives the same times.
            let (times, m) = execute(&platform, &pl.sequence.chunks, &pl.sequence.ops, Ports::Shared(u));
            if pl.sequence.fill_gaps {
                assert_eq!(times, pl.sequence.times, "{what}");
            }
            assert!(m <= strict_makespan(&platform, &pl.sequence.chunks, &pl.sequence.ops, Ports::Shared(u)) + 1e-9);
        }
    }
}

/// An uplink slower than every link gives every transfer all of it: then
/// the shared executor is the one-port executor (two-port, full duplex)
/// on links as slow as the uplink.
#[test]
fn an_uplink_slower_than_every_link_is_one_port() {
    for seed in 0..60u64 {
        let mut r = rng(7_000 + seed);
        let platform = seeded_platform(&mut r, seed, 7);
        let wk = platform.workers();
        let slowest = |f: fn(&dls_lp::Worker) -> f64| wk.iter().map(f).fold(0.0, f64::max);
        let duplex = seed % 2 == 1;
        let u = Uplink::new(slowest(|w| w.c) * 1.5, slowest(|w| w.d) * 1.5 + 1e-3, duplex).expect("valid");
        let as_slow = dls_lp::Platform::new(
            wk.iter()
                .map(|w| dls_lp::Worker {
                    c: u.send,
                    d: u.ret,
                    ..w.clone()
                })
                .collect(),
        )
        .expect("valid");
        let classical = if duplex { Ports::Two } else { Ports::One };
        let load = r.random_range(20..300);
        let pl = plan(
            &as_slow,
            &Request {
                ports: classical,
                ..Request::new(load, Strategy::Rounds)
            },
        )
        .expect("plans");
        let (s, _) = execute(&platform, &pl.sequence.chunks, &pl.sequence.ops, Ports::Shared(u));
        let (c, _) = execute(&as_slow, &pl.sequence.chunks, &pl.sequence.ops, classical);
        for (a, b) in s.iter().zip(&c) {
            for (x, y) in [
                (a.send_start, b.send_start),
                (a.send_end, b.send_end),
                (a.compute_end, b.compute_end),
                (a.return_start, b.return_start),
                (a.return_end, b.return_end),
            ] {
                assert_close(x, y, 1e-9, &format!("seed {seed}"));
            }
        }
    }
}

/// Many rounds behind a full-duplex uplink approach its bound, which one
/// port could not: a send and a return cross at once, and slow links are
/// served side by side.
#[test]
fn rounds_behind_an_uplink_approach_its_bound() {
    let platform = dls_lp::Platform::new(vec![
        dls_lp::Worker::new("a", 0.040, 0.10, 0.040),
        dls_lp::Worker::new("b", 0.080, 0.12, 0.080),
        dls_lp::Worker::new("c", 0.040, 0.30, 0.040),
        dls_lp::Worker::new("d", 0.120, 0.08, 0.120),
    ])
    .expect("valid");
    let u = Uplink::new(0.02, 0.02, true).expect("valid");
    let load = 2000;
    let bound = bound::steady_state_uplink(&platform, u).makespan_bound(load);
    let one = bound::steady_state(&platform, Ports::One)
        .expect("bound")
        .makespan_bound(load);
    let req = Request {
        ports: Ports::Shared(u),
        ..Request::new(load, Strategy::Rounds)
    };
    let r = plan(&platform, &req).expect("plans");
    assert!(r.makespan() <= 1.06 * bound, "{} vs bound {bound}", r.makespan());
    assert!(r.makespan() < 0.8 * one, "{} vs one-port bound {one}", r.makespan());
}

#[test]
fn a_bad_uplink_is_refused_by_name() {
    for (send, ret) in [
        (0.0, 1.0),
        (-1.0, 1.0),
        (f64::NAN, 1.0),
        (1.0, -0.1),
        (1.0, f64::INFINITY),
    ] {
        let e = Uplink::new(send, ret, true).expect_err("refused").to_string();
        assert!(e.contains("uplink"), "{e}");
    }
}

/// Costs measured under load hold where a send and a return cross: one
/// lane (one port, a half-duplex uplink) takes them out again, two lanes
/// keep them, and a platform without them is itself under every model.
#[test]
fn costs_under_load_are_taken_out_for_one_lane_only() {
    let loaded = dls_lp::Worker {
        under_load: Some([1.25, 2.0, 1.0]),
        ..dls_lp::Worker::new("a", 0.05, 0.02, 0.01)
    };
    let plain = dls_lp::Worker::new("b", 0.04, 0.03, 0.02);
    let duplex = Uplink::new(0.04, 0.02, true).expect("valid");
    let half = Uplink::new(0.04, 0.02, false).expect("valid");
    let p = dls_lp::Platform::new(vec![loaded.clone(), plain.clone()])
        .expect("valid")
        .with_uplink(Some(duplex));
    for ports in [Ports::One, Ports::Shared(half)] {
        let q = p.for_ports(ports);
        let a = &q.workers()[0];
        // 0.05 / 1.25, 0.02 / 2, 0.01 / 1.
        assert!(
            (a.c - 0.04).abs() < 1e-15 && (a.w - 0.01).abs() < 1e-15 && a.d == 0.01,
            "{a:?}"
        );
        assert_eq!(a.under_load, None);
        assert_eq!(q.workers()[1], plain);
        assert_eq!(q.uplink(), Some(duplex));
    }
    for ports in [Ports::Two, Ports::Shared(duplex)] {
        assert_eq!(p.for_ports(ports), p);
    }
    let without = dls_lp::Platform::new(vec![plain]).expect("valid");
    assert_eq!(without.for_ports(Ports::One), without);
}

/// Workers whose returns are slowed while they receive: plans behind a
/// full-duplex uplink still hold to the lane's rules, with each such
/// return's work done at its speed while its worker's own send is under
/// way (the sweep of `check_shared`), and some of them are so slowed.
#[test]
fn returns_slowed_while_their_worker_receives_follow_the_lane() {
    let mut crossed = 0;
    for seed in 0..40u64 {
        let mut r = rng(7_000 + seed);
        let base = seeded_platform(&mut r, seed, 6);
        let workers = (base.workers().iter())
            .map(|w| dls_lp::Worker {
                return_receiving: r.random_bool(0.7).then(|| r.random_range(1.0..3.0)),
                ..w.clone()
            })
            .collect();
        let platform = dls_lp::Platform::new(workers).expect("valid");
        let u = random_uplink(&mut r, &platform, true);
        let load = r.random_range(20..300);
        let req = Request {
            ports: Ports::Shared(u),
            ..Request::new(load, Strategy::Rounds)
        };
        let pl = plan(&platform, &req).expect("plans");
        let what = format!("seed {seed}, {u:?}");
        assert_eq!(pl.loads.iter().sum::<u64>(), load, "{what}");
        check_shared(&platform, &pl.sequence, u, &what);
        let seq = &pl.sequence;
        for (j, (c, t)) in seq.chunks.iter().zip(&seq.times).enumerate() {
            let slowed = platform.workers()[c.worker].return_speed_receiving() < 1.0;
            let under_own_send = (seq.chunks.iter().zip(&seq.times)).enumerate().any(|(k, (o, s))| {
                k != j && o.worker == c.worker && s.send_start < t.return_end && s.send_end > t.return_start
            });
            crossed += usize::from(slowed && under_own_send);
        }
    }
    assert!(
        crossed > 20,
        "only {crossed} slowed returns crossed their worker's sends"
    );
}
