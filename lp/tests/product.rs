//! Plans of one product against what must hold whatever the planner
//! chose: every element of C computed once over the whole of k, memory
//! limits kept, a closed form for one worker, the makespan bound against
//! every port order of small instances (brute force, one send at a time
//! and sends crossing behind an uplink), the timing rule the runtime
//! follows reproducing the planner's order, and its times against the
//! port's model read off them (sends at once, one per worker, in order,
//! each at its share).

mod common;
use common::rng;
use dls_lp::product::timeline::{time, Op, Port, Timing};
use dls_lp::product::{plan_on, plan_product, Distribution, ProductRequest, ProductWorker, WINDOW};
use rand::Rng;

fn worker(send: f64, ret: f64, flop: f64, memory: Option<u64>) -> ProductWorker {
    ProductWorker {
        send,
        ret,
        flop,
        memory,
    }
}

fn random_workers(r: &mut impl Rng, p: usize, memory: bool) -> Vec<ProductWorker> {
    (0..p)
        .map(|_| {
            let mem = memory.then(|| r.random_range(200..5_000u64));
            worker(
                r.random_range(1e-6..1e-4),
                r.random_range(0.0..1e-4),
                r.random_range(1e-9..1e-7),
                mem,
            )
        })
        .collect()
}

#[test]
fn every_element_of_c_is_computed_once_over_all_of_k_within_memory() {
    for seed in 0..60u64 {
        let mut r = rng(4000 + seed);
        let p = 1 + (seed as usize % 6);
        let ws = random_workers(&mut r, p, seed % 2 == 0);
        let (n, k, m) = (r.random_range(1..90), r.random_range(1..70), r.random_range(1..90));
        let mut req = ProductRequest::new(n, k, m);
        req.panel_values = r.random_range(1..400);
        req.select = seed % 3 == 0;
        let plan = match plan_product(&ws, &req) {
            Ok(p) => p,
            // Only a worker too small for one value and one panel may refuse.
            Err(e) => {
                assert!(ws.iter().any(|w| w.memory.is_some_and(|m| m < 3)), "seed {seed}: {e}");
                continue;
            }
        };
        let mut owner = vec![usize::MAX; n * m];
        for (i, pc) in plan.pieces.iter().enumerate() {
            let rc = pc.rect;
            assert!(plan.enrolled.contains(&pc.worker));
            for row in rc.row..rc.row + rc.height {
                for col in rc.col..rc.col + rc.width {
                    assert_eq!(owner[row * m + col], usize::MAX, "seed {seed}: ({row},{col}) twice");
                    owner[row * m + col] = i;
                }
            }
            let mut at = 0;
            for panel in &pc.panels {
                assert_eq!(panel.start, at, "seed {seed}: panels of piece {i} leave a gap");
                assert!(!panel.is_empty());
                at = panel.end;
            }
            assert_eq!(at, k, "seed {seed}: piece {i} does not reach k");
            let several = plan.pieces.iter().filter(|q| q.worker == pc.worker).count() > 1;
            let c = (rc.height * rc.width) as u64 * if several { 2 } else { 1 };
            let deepest = pc.panels.iter().map(|p| p.len()).max().unwrap_or(0) as u64;
            let held = c + WINDOW as u64 * deepest * (rc.height + rc.width) as u64;
            if let Some(mem) = ws[pc.worker].memory {
                assert!(held <= mem, "seed {seed}: piece {i} holds {held} > {mem}");
            }
        }
        assert!(
            owner.iter().all(|&o| o != usize::MAX),
            "seed {seed}: an element of C is nobody's"
        );
        // Each send once, each return once, each after its piece's panels.
        let sends = plan.timing.ops.iter().filter(|o| matches!(o, Op::Send { .. })).count();
        let panels: usize = plan.pieces.iter().map(|p| p.panels.len()).sum();
        assert_eq!(sends, panels);
        let returns = plan
            .timing
            .ops
            .iter()
            .filter(|o| matches!(o, Op::Return { .. }))
            .count();
        assert_eq!(returns, plan.pieces.len());
    }
}

#[test]
fn one_worker_matches_the_closed_form() {
    // P equal panels each sent in s and added in c, then a return of r:
    // the port and the worker each carry everything once, offset by one
    // panel: max(P·s + c, s + P·c) + r.
    for (send, flop) in [(1e-3, 1e-6), (1e-5, 1e-4), (1e-4, 1.25e-5)] {
        let (n, k, m) = (8usize, 64usize, 8usize);
        let ws = [worker(send, 2e-4, flop, None)];
        let mut req = ProductRequest::new(n, k, m);
        req.panel_values = 16 * 8; // 8 deep: 8 panels
        let plan = plan_product(&ws, &req).expect("plans");
        assert_eq!(plan.pieces.len(), 1);
        let big_p = plan.pieces[0].panels.len() as f64;
        assert_eq!(big_p, 8.0);
        let s = send * 16.0 * 8.0;
        let c = flop * 2.0 * 64.0 * 8.0;
        let r = 2e-4 * 64.0;
        let want = (big_p * s + c).max(s + big_p * c) + r;
        assert!(
            (plan.makespan() - want).abs() < 1e-9 * want,
            "{} vs {want}",
            plan.makespan()
        );
    }
}

/// Every order the rule can follow on `port`, for tiny plans.
fn all_orders(plan: &dls_lp::product::ProductPlan, ws: &[ProductWorker], port: Port) -> Vec<f64> {
    let mut ops: Vec<Op> = Vec::new();
    for (i, pc) in plan.pieces.iter().enumerate() {
        ops.extend((0..pc.panels.len()).map(|j| Op::Send { piece: i, panel: j }));
        ops.push(Op::Return { piece: i });
    }
    let mut out = Vec::new();
    permute(&mut ops, 0, &mut |order| {
        if let Some(t) = time(ws, &plan.pieces, order, port, WINDOW) {
            out.push(t.makespan);
        }
    });
    out
}

fn permute(v: &mut Vec<Op>, at: usize, f: &mut impl FnMut(&[Op])) {
    if at == v.len() {
        f(v);
        return;
    }
    for i in at..v.len() {
        v.swap(at, i);
        permute(v, at + 1, f);
        v.swap(at, i);
    }
}

#[test]
fn no_port_order_beats_the_bound_and_the_greedy_one_is_close_to_the_best() {
    let mut worst: f64 = 1.0;
    for seed in 0..24u64 {
        let mut r = rng(5000 + seed);
        let ws = random_workers(&mut r, 2, false);
        let (n, k, m) = (r.random_range(2..12), r.random_range(2..12), r.random_range(2..12));
        let mut req = ProductRequest::new(n, k, m);
        req.duplex = seed % 2 == 1;
        req.select = false;
        // Behind an uplink: a third of the cases, it carrying one to three
        // links' worth.
        if seed % 3 == 0 {
            req.uplink = ws[0].send.min(ws[1].send) * r.random_range(0.3..1.0);
        }
        // Two panels per piece at most: 2 workers × (2 sends + 1 return).
        req.panel_values = ((n + m) * k.div_ceil(2)) as u64;
        let plan = plan_on(&ws, &req, &[0, 1]).expect("plans");
        // Sends cross only behind an uplink, and on a full-duplex port.
        let most = if req.uplink > 0.0 && req.duplex { 2 } else { 1 };
        let times: Vec<f64> = (1..=most)
            .flat_map(|sends| {
                let port = Port {
                    duplex: req.duplex,
                    sends,
                    uplink: req.uplink,
                };
                all_orders(&plan, &ws, port)
            })
            .collect();
        assert!(!times.is_empty());
        let best = times.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            best >= plan.bound.makespan * (1.0 - 1e-12),
            "seed {seed}: an order takes {best}, under the bound {}",
            plan.bound.makespan
        );
        assert!(plan.makespan() >= best * (1.0 - 1e-12));
        worst = worst.max(plan.makespan() / best);
    }
    assert!(worst < 1.35, "greedy order up to {worst:.3} × the best");
}

#[test]
fn the_timing_rule_reproduces_the_planners_order() {
    for seed in 0..30u64 {
        let mut r = rng(6000 + seed);
        let ws = random_workers(&mut r, 1 + seed as usize % 5, seed % 3 == 0);
        let mut req = ProductRequest::new(r.random_range(5..60), r.random_range(5..60), r.random_range(5..60));
        req.duplex = seed % 2 == 0;
        req.panel_values = r.random_range(20..300);
        if seed % 4 == 1 {
            req.uplink = r.random_range(1e-7..4e-5);
        }
        let Ok(plan) = plan_product(&ws, &req) else { continue };
        let again = time(&ws, &plan.pieces, &plan.timing.ops, plan.port, WINDOW).expect("a valid order");
        assert_eq!(again, plan.timing);
        assert!(plan.makespan() >= plan.bound.makespan * (1.0 - 1e-12));
        holds_the_port_model(&ws, &plan.pieces, &plan.timing, plan.port);
    }
}

/// What the port's model asks of a timing, read off its times: returns
/// one at a time (with sends, on one port); at most `port.sends` sends at
/// once, never two to one worker, started in order; a send of v values to
/// worker i lasting `v · max(send_i, sends · uplink)`.
fn holds_the_port_model(ws: &[ProductWorker], pieces: &[dls_lp::product::Piece], t: &Timing, port: Port) {
    let mut last_start = 0.0f64;
    let eps = 1e-12;
    let sends: Vec<(usize, f64, f64)> = t
        .ops
        .iter()
        .zip(&t.times)
        .filter_map(|(op, tm)| match *op {
            Op::Send { piece, panel } => {
                let w = pieces[piece].worker;
                let per = ws[w].send.max(port.sends as f64 * port.uplink);
                let want = per * pieces[piece].panel_values(panel) as f64;
                assert!(
                    (tm.end - tm.start - want).abs() <= 1e-9 * want.max(1e-9),
                    "send lasts {} not {want}",
                    tm.end - tm.start
                );
                assert!(
                    tm.start >= last_start - eps,
                    "a send started before the one ahead of it"
                );
                last_start = tm.start;
                Some((w, tm.start, tm.end))
            }
            Op::Return { .. } => None,
        })
        .collect();
    for &(w, s, _) in &sends {
        let at: Vec<usize> = sends
            .iter()
            .filter(|&&(_, a, b)| a <= s + eps && s < b - eps)
            .map(|x| x.0)
            .collect();
        assert!(
            at.len() <= port.sends,
            "{} sends at once on a port of {}",
            at.len(),
            port.sends
        );
        assert_eq!(
            at.iter().filter(|&&x| x == w).count(),
            1,
            "two sends to worker {w} at once"
        );
    }
    let returns: Vec<(f64, f64)> = t
        .ops
        .iter()
        .zip(&t.times)
        .filter(|(op, _)| matches!(op, Op::Return { .. }))
        .map(|(_, tm)| (tm.start, tm.end))
        .collect();
    let lane: Vec<(f64, f64)> = if port.duplex {
        returns
    } else {
        t.times.iter().map(|tm| (tm.start, tm.end)).collect()
    };
    for (i, a) in lane.iter().enumerate() {
        for b in &lane[i + 1..] {
            assert!(
                a.1 <= b.0 + eps || b.1 <= a.0 + eps,
                "two transfers at once on a lane of one"
            );
        }
    }
}

#[test]
fn sends_cross_behind_an_uplink_that_carries_several_links() {
    // Four equal workers whose links carry a quarter of the uplink each:
    // sends at once finish sooner than one at a time, and the plan says
    // how many cross.
    let ws: Vec<ProductWorker> = (0..4).map(|_| worker(4e-6, 1e-6, 1e-10, None)).collect();
    let mut req = ProductRequest::new(64, 64, 64);
    req.duplex = true;
    req.panel_values = 512;
    let alone = plan_product(&ws, &req).expect("plans");
    assert_eq!(alone.port.sends, 1);
    req.uplink = 1e-6;
    let crossing = plan_product(&ws, &req).expect("plans");
    assert!(crossing.port.sends > 1, "{:?}", crossing.port);
    assert!(
        crossing.makespan() < 0.6 * alone.makespan(),
        "{} vs {}",
        crossing.makespan(),
        alone.makespan()
    );
    holds_the_port_model(&ws, &crossing.pieces, &crossing.timing, crossing.port);
    // The uplink carries every value of A and B the plan sends.
    let sent = crossing.bound.sent as f64;
    assert!(crossing.makespan() >= sent * req.uplink);
    // An uplink no faster than one link leaves one send at a time.
    req.uplink = 4e-6;
    assert_eq!(plan_product(&ws, &req).expect("plans").port.sends, 1);
}

#[test]
fn the_partition_follows_speeds_and_stays_near_the_perimeter_bound() {
    let flops = [1e-9, 2e-9, 3e-9, 6e-9];
    let ws: Vec<ProductWorker> = flops.iter().map(|&f| worker(1e-9, 1e-9, f, None)).collect();
    let mut req = ProductRequest::new(1200, 1200, 1200);
    req.select = false;
    let het = plan_product(&ws, &req).expect("plans");
    let speed: f64 = flops.iter().map(|f| 1.0 / f).sum();
    for rc in &het.rects {
        let share = rc.area() as f64 / (1200.0 * 1200.0);
        let want = (1.0 / flops[rc.worker]) / speed;
        assert!(
            (share - want).abs() < 0.01,
            "worker {}: {share} of C, not {want}",
            rc.worker
        );
    }
    let ratio = het.bound.partition as f64 / het.bound.lower;
    assert!((1.0..1.15).contains(&ratio), "half-perimeters {ratio} × the bound");
    req.distribution = Distribution::Homogeneous;
    let hom = plan_product(&ws, &req).expect("plans");
    for rc in &hom.rects {
        assert!((rc.area() as f64 / 360_000.0 - 1.0).abs() < 0.01);
    }
    // Equal areas on unequal workers wait for the slowest.
    assert!(het.makespan() < 0.8 * hom.makespan());
}

#[test]
fn a_worker_whose_link_costs_more_than_it_computes_is_left_out() {
    // The third worker's link is so slow that its panels alone outlast
    // the others' whole product.
    let ws = [
        worker(1e-8, 1e-8, 1e-9, None),
        worker(1e-8, 1e-8, 1e-9, None),
        worker(1e-3, 1e-3, 1e-9, None),
    ];
    let req = ProductRequest::new(300, 300, 300);
    let plan = plan_product(&ws, &req).expect("plans");
    assert_eq!(plan.enrolled, vec![0, 1]);
    assert!(!plan.notes.is_empty());
}

#[test]
fn bad_requests_are_named() {
    let ws = [worker(1e-8, 1e-8, 1e-9, None)];
    let e = plan_product(&ws, &ProductRequest::new(0, 3, 3)).expect_err("refused");
    assert!(e.to_string().contains("nothing to compute"), "{e}");
    let e = plan_product(&[worker(f64::NAN, 1e-8, 1e-9, None)], &ProductRequest::new(3, 3, 3)).expect_err("refused");
    assert!(e.to_string().contains("send"), "{e}");
    let e = plan_product(&[worker(1e-8, 1e-8, 1e-9, Some(2))], &ProductRequest::new(3, 3, 3)).expect_err("refused");
    assert!(e.to_string().contains("memory"), "{e}");
    for bad in [f64::NAN, -1e-9, f64::INFINITY] {
        let mut req = ProductRequest::new(3, 3, 3);
        req.uplink = bad;
        let e = plan_product(&ws, &req).expect_err("refused");
        assert!(e.to_string().contains("uplink"), "{e}");
    }
}

#[test]
fn areas_even_out_finish_times_the_speeds_alone_do_not_see() {
    // Equal speeds, one link fifty times slower: speeds alone give equal
    // areas (the homogeneous plan); the slow link's worker should get less.
    let ws = [worker(2e-9, 2e-9, 1e-9, None), worker(1e-7, 1e-7, 1e-9, None)];
    let mut req = ProductRequest::new(600, 600, 600);
    req.select = false;
    let het = plan_product(&ws, &req).expect("plans");
    req.distribution = Distribution::Homogeneous;
    let hom = plan_product(&ws, &req).expect("plans");
    let area =
        |p: &dls_lp::product::ProductPlan, w: usize| p.rects.iter().find(|r| r.worker == w).map_or(0, |r| r.area());
    assert!(area(&het, 1) < area(&het, 0), "{:?}", het.rects);
    assert!(
        het.makespan() < 0.97 * hom.makespan(),
        "{} vs {}",
        het.makespan(),
        hom.makespan()
    );
}
