//! On-demand schedules (self-scheduling, factoring) in the simulated run.

use super::*;

#[test]
fn self_scheduling_returns_every_product_once() {
    let p = platform();
    for (m, size) in [(1u64, 1usize), (10, 3), (100, 7), (57, 57)] {
        let pl = plan(&p, &Request::new(m, Strategy::Fifo)).expect("plans");
        let c = Config {
            self_schedule: Some(Sizing::Fixed(size)),
            ..cfg()
        };
        let run = simulate(&p, p.workers(), &pl, c, &[]);
        check_complete(&run, &format!("m={m} size={size}"));
        let chunks = run.transfers.iter().filter(|t| t.2).count();
        assert_eq!(chunks, (m as usize).div_ceil(size), "one send per chunk");
    }
    // Equal workers, negligible communication: the batch splits evenly, so
    // the makespan is (m / p) chunks of computing.
    let eq = Platform::new((0..4).map(|i| Worker::new(format!("e{i}"), 1e-9, 1.0, 1e-9)).collect()).expect("valid");
    let pl = dls_lp::baseline::with_loads(&eq, vec![0, 1, 2, 3], vec![10; 4], Ports::One).expect("plan");
    let run = simulate(
        &eq,
        eq.workers(),
        &pl,
        Config {
            self_schedule: Some(Sizing::Fixed(1)),
            ..cfg()
        },
        &[],
    );
    check_complete(&run, "equal workers");
    assert!((run.end - 10.0).abs() < 1e-6, "{}", run.end);
}

#[test]
fn factoring_hands_out_halving_batches() {
    // Equal workers, negligible communication: FAC2 over 4 workers and 100
    // products hands out 13,13,13,13 then 6s, 3s, 2s, 1s (by hand); each
    // worker computes a quarter of the batch, so the makespan is 25 units of
    // computing.
    let eq = Platform::new((0..4).map(|i| Worker::new(format!("e{i}"), 1e-9, 1.0, 1e-9)).collect()).expect("valid");
    let pl = dls_lp::baseline::with_loads(&eq, vec![0, 1, 2, 3], vec![25; 4], Ports::One).expect("plan");
    let c = Config {
        self_schedule: Some(Sizing::Factoring),
        ..cfg()
    };
    let run = simulate(&eq, eq.workers(), &pl, c, &[]);
    check_complete(&run, "factoring");
    assert_eq!(run.transfers.iter().filter(|t| t.2).count(), 20, "five batches of four");
    assert!((run.end - 25.0).abs() < 1e-6, "{}", run.end);
    // Weighted by speed 3:1: the fast worker gets three quarters of each
    // batch and both finish together (no product left for a last straggle).
    let two = Platform::new(vec![
        Worker::new("fast", 1e-9, 1.0, 1e-9),
        Worker::new("slow", 1e-9, 3.0, 1e-9),
    ])
    .expect("valid");
    let pl = dls_lp::baseline::with_loads(&two, vec![0, 1], vec![60, 60], Ports::One).expect("plan");
    let c = Config {
        self_schedule: Some(Sizing::WeightedFactoring),
        ..cfg()
    };
    let run = simulate(&two, two.workers(), &pl, c, &[]);
    check_complete(&run, "weighted factoring");
    // 120 products at 4/3 products a unit of time together: at least 90;
    // weighted chunks keep the imbalance to the last small chunks.
    assert!(run.end >= 90.0 - 1e-6 && run.end < 95.0, "{}", run.end);
}

#[test]
fn self_scheduling_survives_a_loss() {
    let p = platform();
    let pl = plan(&p, &Request::new(120, Strategy::Fifo)).expect("plans");
    let victim = pl.send_order()[0];
    let sizings = [Sizing::Fixed(5), Sizing::Factoring, Sizing::WeightedFactoring];
    for (sizing, stage) in sizings
        .into_iter()
        .flat_map(|z| [Stage::Sending, Stage::Computing, Stage::AwaitingGrant, Stage::Returning].map(|s| (z, s)))
    {
        let kill = Kill {
            worker: victim,
            stage,
            nth: 1,
        };
        let c = Config {
            self_schedule: Some(sizing),
            ..cfg()
        };
        let run = simulate(&p, p.workers(), &pl, c, &[kill]);
        check_complete(&run, &format!("{sizing:?}, {kill:?}"));
        assert_eq!(
            run.measured.failures.len(),
            1,
            "{sizing:?}, {kill:?}: the victim was lost"
        );
    }
}
