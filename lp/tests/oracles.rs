//! The planner against oracles: the LP, brute force over orders, the
//! report's closed form and its participation experiment.

mod common;
use common::*;
use dls_lp::plan::{order_inc_c, order_inc_cd};
use dls_lp::{fast, lp, plan, Platform, Ports, Request, Rounding, Scenario, Strategy, Timeline, Worker};
use rand::seq::SliceRandom;

const REL: f64 = 1e-6;
const M: f64 = 1000.0;

/// The LP's own objective must match the timeline rebuilt from its loads.
fn lp_makespan(p: &Platform, s: &Scenario, ports: Ports) -> f64 {
    let (alpha, t) = lp::solve(p, s, ports, M).expect("LP solves");
    let sum: f64 = alpha.iter().sum();
    assert_close(sum, M, 1e-9, "LP loads sum to M");
    let rebuilt = Timeline::build(p, s, &alpha, ports).makespan;
    assert!(
        rebuilt <= t * (1.0 + 1e-7),
        "timeline {rebuilt} exceeds LP objective {t}"
    );
    assert_close(rebuilt, t, 1e-6, "LP objective vs rebuilt timeline");
    rebuilt
}

fn fast_fifo_makespan(p: &Platform, order: &[usize], ports: Ports) -> f64 {
    let (alpha, t) = fast::fifo(p, order, ports, M);
    assert_close(alpha.iter().sum(), M, 1e-9, "fast loads sum to M");
    let rebuilt = Timeline::build(p, &Scenario::fifo(order.to_vec()), &alpha, ports).makespan;
    assert_close(rebuilt, t, 1e-9, "fast path makespan vs rebuilt timeline");
    rebuilt
}

fn check_fast_vs_lp(family: Family, sizes: &[usize], cases: u64, shuffle: bool, ports: Ports) {
    for &p in sizes {
        for seed in 0..cases {
            let mut r = rng(seed * 1000 + p as u64);
            let platform = random_platform(&mut r, p, family);
            let mut order = order_inc_c(&platform);
            if shuffle {
                order.shuffle(&mut r);
            }
            let f = fast_fifo_makespan(&platform, &order, ports);
            let l = lp_makespan(&platform, &Scenario::fifo(order.clone()), ports);
            assert_close(f, l, REL, &format!("{family:?} p={p} seed={seed} {ports:?} fast vs LP"));
        }
    }
}

#[test]
fn fast_fifo_equals_lp_bus() {
    check_fast_vs_lp(Family::Bus, &[1, 2, 3, 5, 8, 13], 60, true, Ports::One);
}

#[test]
fn fast_fifo_equals_lp_star_z_below_one() {
    check_fast_vs_lp(Family::Star(0.5), &[1, 2, 3, 5, 8, 13, 30], 80, false, Ports::One);
    check_fast_vs_lp(Family::Star(0.1), &[2, 4, 9, 20], 80, true, Ports::One);
}

#[test]
fn fast_fifo_equals_lp_star_z_above_one() {
    check_fast_vs_lp(Family::Star(2.0), &[2, 3, 5, 8, 13, 30], 80, true, Ports::One);
}

#[test]
fn fast_fifo_equals_lp_mixed_z_any_order() {
    check_fast_vs_lp(Family::MixedZ, &[2, 3, 5, 8, 13, 30], 80, true, Ports::One);
}

#[test]
fn fast_fifo_equals_lp_two_ports() {
    check_fast_vs_lp(Family::Star(0.5), &[2, 3, 5, 8, 13], 60, true, Ports::Two);
    check_fast_vs_lp(Family::MixedZ, &[2, 3, 5, 8], 60, true, Ports::Two);
}

#[test]
fn lifo_closed_form_equals_lp() {
    for (family, seeds) in [(Family::Star(0.5), 100), (Family::MixedZ, 100), (Family::Bus, 50)] {
        for p in [1, 2, 4, 7, 15] {
            for seed in 0..seeds {
                let platform = random_platform(&mut rng(seed + 77 * p as u64), p, family);
                let order = order_inc_cd(&platform);
                let (alpha, t) = fast::lifo(&platform, &order, M);
                let s = Scenario::lifo(order);
                let rebuilt = Timeline::build(&platform, &s, &alpha, Ports::One).makespan;
                assert_close(rebuilt, t, 1e-9, "LIFO closed form vs its timeline");
                let l = lp_makespan(&platform, &s, Ports::One);
                assert_close(
                    t,
                    l,
                    REL,
                    &format!("{family:?} p={p} seed={seed} LIFO closed form vs LP"),
                );
            }
        }
    }
}

/// Brute force: the best FIFO (or LIFO) over every order, each by the LP.
/// `platform` with bounds on some workers below what the unbounded
/// LIFO gives them (so that they bind), from `r`; every worker bounded
/// when `all`, with room for `M` units in all.
fn lifo_bounds_binding(r: &mut rand_chacha::ChaCha8Rng, platform: &Platform, all: bool) -> Platform {
    use rand::Rng;
    let (free, _) = fast::lifo(platform, &order_inc_cd(platform), M);
    let mut workers: Vec<Worker> = platform.workers().to_vec();
    let (mut room, mut bounded) = (0.0, 0);
    for (w, &a) in workers.iter_mut().zip(&free) {
        if all || r.random_bool(0.5) {
            let b = (a * r.random_range(0.1..0.95)).floor().max(1.0);
            *w = w.clone().with_max_load(b as u64);
            room += b;
            bounded += 1;
        }
    }
    if bounded == workers.len() && room < M {
        // Room for the batch: the fastest link's worker takes the rest.
        let k = order_inc_cd(platform)[0];
        let b = workers[k].bound() + (M - room);
        workers[k] = workers[k].clone().with_max_load(b as u64);
    }
    Platform::new(workers).expect("valid bounded platform")
}

#[test]
fn lifo_under_binding_bounds_equals_lp() {
    let mut bound_somewhere = 0;
    for (family, seeds) in [(Family::Star(0.5), 60), (Family::MixedZ, 60), (Family::Bus, 30)] {
        for p in [1, 2, 3, 5, 9, 16, 40] {
            for seed in 0..seeds {
                let mut r = rng(seed + 131 * p as u64);
                let plain = random_platform(&mut r, p, family);
                let platform = lifo_bounds_binding(&mut r, &plain, seed % 3 == 0);
                let order = order_inc_cd(&platform);
                let what = format!("{family:?} p={p} seed={seed}");
                let (alpha, t) = fast::lifo_bounded(&platform, &order, M).expect("room for the batch");
                assert_close(alpha.iter().sum(), M, 1e-9, &format!("{what}: loads sum to M"));
                for (w, a) in platform.workers().iter().zip(&alpha) {
                    assert!(
                        *a >= 0.0 && *a <= w.bound() * (1.0 + 1e-12),
                        "{what}: {a} outside [0, {}]",
                        w.bound()
                    );
                }
                bound_somewhere += usize::from(
                    platform
                        .workers()
                        .iter()
                        .zip(&alpha)
                        .any(|(w, a)| *a >= w.bound() * (1.0 - 1e-9)),
                );
                for ports in [Ports::One, Ports::Two] {
                    let s = Scenario::lifo(order.clone());
                    let rebuilt = Timeline::build(&platform, &s, &alpha, ports).makespan;
                    assert_close(rebuilt, t, 1e-9, &format!("{what}: greedy vs its timeline"));
                    assert_close(
                        t,
                        lp_makespan(&platform, &s, ports),
                        REL,
                        &format!("{what} {ports:?}: greedy vs LP"),
                    );
                }
            }
        }
    }
    // Most cases have a worker held at its bound (else nothing is tested).
    assert!(bound_somewhere > 800, "only {bound_somewhere} cases bound a worker");
}

#[test]
fn lifo_under_bounds_too_small_for_the_batch_is_refused() {
    let workers = (0..3).map(|i| Worker::new(format!("w{i}"), 0.1 * (i + 1) as f64, 1.0, 0.05).with_max_load(300));
    let platform = Platform::new(workers.collect()).expect("valid platform");
    assert!(fast::lifo_bounded(&platform, &order_inc_cd(&platform), M).is_none());
    assert!(fast::lifo_bounded(&platform, &order_inc_cd(&platform), 899.0).is_some());
}

fn brute(platform: &Platform, lifo: bool, ports: Ports) -> f64 {
    permutations(platform.len())
        .into_iter()
        .map(|o| {
            lp_makespan(
                platform,
                &if lifo { Scenario::lifo(o) } else { Scenario::fifo(o) },
                ports,
            )
        })
        .fold(f64::INFINITY, f64::min)
}

fn rational(platform: &Platform, strategy: Strategy, ports: Ports) -> f64 {
    let req = Request {
        load: M as u64,
        strategy,
        ports,
        rounding: Rounding::Paper,
    };
    plan(platform, &req).expect("plans").makespan_rational()
}

#[test]
fn fifo_is_the_best_fifo_order_by_brute_force() {
    for family in [
        Family::Star(0.5),
        Family::Star(0.2),
        Family::Star(2.0),
        Family::Star(1.0),
        Family::Bus,
    ] {
        for p in 2..=5 {
            for seed in 0..12 {
                let platform = random_platform(&mut rng(seed * 31 + p as u64), p, family);
                for ports in [Ports::One, Ports::Two] {
                    let best = brute(&platform, false, ports);
                    let ours = rational(&platform, Strategy::Fifo, ports);
                    assert_close(
                        ours,
                        best,
                        REL,
                        &format!("{family:?} p={p} seed={seed} {ports:?} fifo vs brute force"),
                    );
                }
            }
        }
    }
}

#[test]
fn lifo_is_the_best_lifo_order_by_brute_force() {
    for family in [Family::Star(0.5), Family::MixedZ, Family::Bus] {
        for p in 2..=5 {
            for seed in 0..12 {
                let platform = random_platform(&mut rng(seed * 17 + p as u64), p, family);
                let best = brute(&platform, true, Ports::One);
                let ours = rational(&platform, Strategy::Lifo, Ports::One);
                assert_close(
                    ours,
                    best,
                    REL,
                    &format!("{family:?} p={p} seed={seed} lifo vs brute force"),
                );
            }
        }
    }
}

#[test]
fn mixed_z_fifo_never_worse_than_inc_c() {
    for p in [2, 3, 5, 9, 20] {
        for seed in 0..20 {
            let platform = random_platform(&mut rng(seed * 5 + p as u64), p, Family::MixedZ);
            let req = Request::new(M as u64, Strategy::Fifo);
            let f = plan(&platform, &req).expect("plans");
            assert!(!f.optimal, "Theorem 1 does not apply with mixed z");
            let inc_c = lp_makespan(&platform, &Scenario::fifo(order_inc_c(&platform)), Ports::One);
            assert!(
                f.makespan_rational() <= inc_c * (1.0 + REL),
                "p={p} seed={seed}: {} > inc-c {inc_c}",
                f.makespan_rational()
            );
        }
    }
}

#[test]
fn best_is_no_worse_than_any_pair_of_orders() {
    for p in 2..=4 {
        for seed in 0..4 {
            let platform = random_platform(&mut rng(seed * 13 + p as u64), p, Family::MixedZ);
            let perms = permutations(p);
            let mut oracle = f64::INFINITY;
            for s1 in &perms {
                for s2 in &perms {
                    let s = Scenario {
                        send_order: s1.clone(),
                        return_order: s2.clone(),
                    };
                    oracle = oracle.min(lp_makespan(&platform, &s, Ports::One));
                }
            }
            // The exhaustive search finds the LP optimum over every pair.
            let ex =
                dls_lp::plan::exhaustive(&dls_lp::Problem::new(&platform, Ports::One, M as u64)).expect("searches");
            assert_close(
                ex.makespan,
                oracle,
                REL,
                &format!("p={p} seed={seed} exhaustive vs all pairs"),
            );
            // `best` runs at least as fast, in whole units, as fifo and lifo;
            // when it says optimal, it is the LP optimum.
            let req = |strategy| Request {
                load: M as u64,
                strategy,
                ports: Ports::One,
                rounding: Rounding::Refined,
            };
            let best = plan(&platform, &req(Strategy::Best)).expect("plans");
            for st in [Strategy::Fifo, Strategy::Lifo] {
                let other = plan(&platform, &req(st)).expect("plans");
                assert!(
                    best.makespan() <= other.makespan() * (1.0 + 1e-12),
                    "p={p} seed={seed}: best vs {st}"
                );
            }
            if best.optimal {
                assert_close(
                    best.makespan_rational(),
                    oracle,
                    REL,
                    &format!("p={p} seed={seed} optimal best"),
                );
            }
        }
    }
}

#[test]
fn theorem_2_bus_closed_form() {
    for p in [1, 2, 3, 6, 10, 25] {
        for seed in 0..40 {
            let mut r = rng(seed + 1000 * p as u64);
            let platform = random_platform(&mut r, p, Family::Bus);
            let wk = platform.workers();
            let w: Vec<f64> = wk.iter().map(|x| x.w).collect();
            let rho = fast::bus_throughput(wk[0].c, wk[0].d, &w);
            let ours = rational(&platform, Strategy::Fifo, Ports::One);
            assert_close(ours, M / rho, REL, &format!("p={p} seed={seed} fifo vs Theorem 2"));
        }
    }
}

#[test]
fn theorem_2_bus_order_does_not_matter() {
    let platform = random_platform(&mut rng(4), 6, Family::Bus);
    let base = lp_makespan(&platform, &Scenario::fifo((0..6).collect()), Ports::One);
    for o in permutations(6).into_iter().step_by(37) {
        assert_close(
            lp_makespan(&platform, &Scenario::fifo(o), Ports::One),
            base,
            REL,
            "bus FIFO order",
        );
    }
}

/// Section 5.3.4: speeds (comm 10, 8, 8, x; comp 9, 9, 10, 1), z = 1/2, a
/// unit's communication at speed 1 takes a tenth of its computation.
fn participation_platform(x: f64) -> Platform {
    let comm = [10.0, 8.0, 8.0, x];
    let comp = [9.0, 9.0, 10.0, 1.0];
    Platform::new(
        (0..4)
            .map(|i| {
                let c = 0.1 / comm[i];
                Worker::new(format!("P{}", i + 1), c, 1.0 / comp[i], 0.5 * c)
            })
            .collect(),
    )
    .expect("valid")
}

#[test]
fn participation_experiment() {
    let req = Request::new(1000, Strategy::Fifo);
    let p1 = plan(&participation_platform(1.0), &req).expect("plans");
    assert!(
        p1.alpha[3] < 1e-9,
        "x = 1: worker 4 must get no load, got {}",
        p1.alpha[3]
    );
    assert_eq!(p1.loads[3], 0);
    assert!(p1.alpha[..3].iter().all(|&a| a > 1.0));
    let p3 = plan(&participation_platform(3.0), &req).expect("plans");
    assert!(
        p3.alpha[3] > 1.0,
        "x = 3: worker 4 must get some load, got {}",
        p3.alpha[3]
    );
    // Enrolling worker 4 with x = 3 is (slightly) better than leaving it out.
    let three = Platform::new(participation_platform(3.0).workers()[..3].to_vec()).expect("valid");
    assert!(p3.makespan_rational() < plan(&three, &req).expect("plans").makespan_rational());
}

#[test]
fn fifo_has_at_most_one_idle_worker() {
    for family in [Family::Star(0.5), Family::Star(3.0), Family::Bus] {
        for p in [2, 4, 8, 16, 40] {
            for seed in 0..30 {
                let platform = random_platform(&mut rng(seed * 7 + p as u64), p, family);
                let f = plan(&platform, &Request::new(M as u64, Strategy::Fifo)).expect("plans");
                let idle = f.rational.idle_workers(&f.alpha);
                assert!(idle <= 1, "{family:?} p={p} seed={seed}: {idle} idle workers");
            }
        }
    }
}

#[test]
fn efficiency_against_the_equivalent_homogeneous_platform() {
    use dls_lp::plan::{efficiency, equivalent_homogeneous};
    // Already homogeneous: efficiency 1.
    let bus = Platform::new((0..4).map(|i| Worker::new(format!("b{i}"), 0.1, 2.0, 0.05)).collect()).expect("valid");
    let p = plan(&bus, &Request::new(1000, Strategy::Fifo)).expect("plans");
    let (e, _) = efficiency(&bus, &p).expect("efficiency");
    assert_close(e, 1.0, 1e-9, "homogeneous platform");
    // Heterogeneous: the equivalent platform averages speeds, and its
    // makespan is Theorem 2's.
    let het = Platform::new(vec![
        Worker::new("a", 0.1, 1.0, 0.05),
        Worker::new("b", 0.2, 4.0, 0.10),
        Worker::new("c", 0.05, 2.0, 0.025),
    ])
    .expect("valid");
    let hom = equivalent_homogeneous(&het).expect("valid");
    let w0 = &hom.workers()[0];
    assert_close(
        1.0 / w0.w,
        (1.0 / 1.0 + 1.0 / 4.0 + 1.0 / 2.0) / 3.0,
        1e-12,
        "average compute speed",
    );
    assert_close(1.0 / w0.c, (10.0 + 5.0 + 20.0) / 3.0, 1e-12, "average link speed");
    let p = plan(&het, &Request::new(1000, Strategy::Fifo)).expect("plans");
    let (e, t_hom) = efficiency(&het, &p).expect("efficiency");
    let rho = fast::bus_throughput(w0.c, w0.d, &[w0.w; 3]);
    assert_close(t_hom, 1000.0 / rho, 1e-7, "homogeneous makespan = Theorem 2");
    assert_close(e, t_hom / p.makespan_rational(), 1e-12, "efficiency");
    // A paced plan is weighed against the equivalent of its links: worker
    // b held to 0.5 s a unit (its link takes 0.2), timed on the paced
    // costs, and weighed on the links' platform as any other plan.
    use dls_lp::pace::{paced, Pace};
    let pace = vec![None, Some(Pace { secs: 0.5, link: 0.2 }), None];
    let slow = paced(&het, &pace);
    assert_eq!(slow.workers()[1].c, 0.5);
    let mut q = plan(&slow, &Request::new(1000, Strategy::Fifo)).expect("plans");
    q.pace = pace;
    assert_eq!(q.costs_on(&het), slow);
    let (e, t_links) = efficiency(&het, &q).expect("efficiency");
    assert_close(t_links, t_hom, 1e-12, "the links' equivalent");
    assert_close(e, t_hom / q.makespan_rational(), 1e-12, "paced efficiency");
}

/// The steady-state bound: the one-port knapsack against the bound's LP,
/// and no strategy's predicted makespan ever below `load / ρ*`.
#[test]
fn steady_state_bound_holds_against_its_lp_and_every_plan() {
    use dls_lp::bound;
    for seed in 0..200u64 {
        let platform = seeded_platform(&mut rng(900 + seed), seed, 7);
        let knap = bound::steady_state(&platform, Ports::One).expect("bound");
        let lp1 = bound::lp(&platform, Ports::One).expect("LP");
        assert_close(
            knap.throughput,
            lp1.throughput,
            1e-7,
            &format!("seed {seed}: knapsack vs LP"),
        );
        // Recompute the constraints from the raw shares.
        let wk = platform.workers();
        let port: f64 = knap.alpha.iter().zip(wk).map(|(a, w)| a * (w.c + w.d)).sum();
        assert!(port <= 1.0 + 1e-9, "seed {seed}: port over-full ({port})");
        assert!(knap.alpha.iter().zip(wk).all(|(a, w)| a * w.w <= 1.0 + 1e-9));
        let two = bound::steady_state(&platform, Ports::Two).expect("two ports");
        let lp2 = bound::lp(&platform, Ports::Two).expect("LP");
        assert_close(
            two.throughput,
            lp2.throughput,
            1e-7,
            &format!("seed {seed}: two ports vs LP"),
        );
        let sent: f64 = two.alpha.iter().zip(wk).map(|(a, w)| a * w.c).sum();
        let returned: f64 = two.alpha.iter().zip(wk).map(|(a, w)| a * w.d).sum();
        assert!(
            sent <= 1.0 + 1e-9 && returned <= 1.0 + 1e-9,
            "seed {seed}: {sent} {returned}"
        );
        assert!(two
            .alpha
            .iter()
            .zip(wk)
            .all(|(a, w)| *a >= 0.0 && a * w.w <= 1.0 + 1e-9));
        assert!(
            two.throughput >= knap.throughput * (1.0 - 1e-9),
            "two ports never bound tighter"
        );
        for strategy in [Strategy::Fifo, Strategy::Lifo, Strategy::IncC, Strategy::IncW] {
            for load in [1u64, 10, 1000] {
                for (ports, st) in [(Ports::One, &knap), (Ports::Two, &two)] {
                    let req = Request {
                        load,
                        strategy,
                        ports,
                        rounding: Rounding::Refined,
                    };
                    let pl = plan(&platform, &req).expect("plans");
                    let b = st.makespan_bound(load);
                    assert!(
                        pl.makespan_rational() >= b * (1.0 - 1e-9),
                        "seed {seed} {strategy} {ports:?} M={load}: {} below the bound {b}",
                        pl.makespan_rational()
                    );
                }
            }
        }
    }
}
