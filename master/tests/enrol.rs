//! End to end: a worker the plan left out is enrolled once the workers it
//! enrolled turn out two to several times slower than planned.

mod common;
use dls_lp::{Platform, Strategy, Worker};
use dls_master::session::{self, Batch, CalibrateOptions, RunConfig};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_left_out_worker_is_enrolled_when_the_enrolled_fall_behind() {
    // a and b: fast links; x: a link 2.5 times slower, and a fast processor.
    // a and b compute slowly enough that x adds well over the 15% asked
    // below whatever this machine's speed (at 80 times the reference, a
    // faster day's processor left x 10% and the precondition failed in
    // most tries; at 120, two identical workers measured 1.6x apart under
    // a loaded CI run, the faster one took 0.77 of the port, and x added
    // 11% in all three tries: at 200, a and b take at most 0.6 of it).
    let w = common::start(&[(Some(200.0), 200.0), (Some(200.0), 200.0), (Some(80.0), 2.0)], None);
    let mut pool = common::connect(&w).await;
    let opts = CalibrateOptions {
        timeout: Duration::from_secs(20),
        ports: false,
        ..CalibrateOptions::new(128)
    };
    // The scenario rests on computing costs measured on this 2-core
    // machine, which vary from run to run (a plan that enrolls one of a
    // and b only, costs that show no slowdown): it is tried three times at
    // most, and must succeed once. Every run must be right.
    let mut why = Vec::new();
    for _ in 0..3 {
        match scenario(&mut pool, &opts).await {
            Ok(()) => break,
            Err(e) => why.push(e),
        }
    }
    assert!(why.len() < 3, "x was never enrolled: {why:#?}");
    pool.close().await;
}

/// Calibrate, believe a and b at least twice faster than measured, run 1,000
/// products on that belief: x must be enrolled. `Err`: the scenario did
/// not come about (or x was not enrolled), with what happened.
async fn scenario(pool: &mut dls_master::session::Pool, opts: &CalibrateOptions) -> Result<(), String> {
    let truth = session::calibrate(pool.links_mut(), opts)
        .await
        .expect("calibrates")
        .platform()
        .expect("platform");
    let t = truth.workers();
    // The plan believes a and b compute in 1.6 times their port time, or
    // in half the time measured if that is less (links measured slow on a
    // loaded machine), but never faster than their port time: each alone
    // leaves the port idle, the two fill it, x is left out. They compute
    // at least twice as slowly as believed.
    let believed_w = |x: &Worker| (1.6 * (x.c + x.d)).min(x.w / 2.0);
    if let Some(x) = t[..2].iter().find(|x| believed_w(x) < x.c + x.d) {
        return Err(format!("{} computes faster than the scenario needs: {x:?}", x.name));
    }
    let believed = Platform::new(
        t.iter()
            .enumerate()
            .map(|(i, x)| Worker {
                w: if i < 2 { believed_w(x) } else { x.w },
                ..x.clone()
            })
            .collect(),
    )
    .expect("platform");

    // As they are, x adds at least a tenth (what enrolment asks).
    let rho = |p: &Platform| {
        dls_lp::bound::steady_state(p, dls_lp::Ports::One)
            .expect("bound")
            .throughput
    };
    let (alone, all) = (rho(&truth.subset(&[0, 1]).expect("subset")), rho(&truth));
    if all <= 1.15 * alone {
        return Err(format!("x does not pay: {alone:.1} vs {all:.1} units/s ({t:?})"));
    }

    let batch = Batch::random(1000, 128, 3);
    let cfg = RunConfig {
        strategy: Strategy::Rounds,
        ports: Some(dls_lp::Ports::One),
        verify: 50,
        ..RunConfig::default()
    };
    let done = session::run_batch(pool, &believed, &batch, &cfg, 1, |_| {})
        .await
        .expect("runs");
    assert_eq!(done.report.verified, 50);
    let computed: u64 = done.report.workers.iter().map(|r| r.products).sum();
    assert_eq!(computed, 1000, "every product computed once");
    assert!(done.report.failures.is_empty(), "{:?}", done.report.failures);
    if done.plan.loads[2] != 0 {
        return Err(format!("the plan did not leave x out: {:?}", done.plan.loads));
    }
    let enrolled: Vec<&str> = (done.report.enrolments.iter())
        .flat_map(|e| e.workers.iter().map(String::as_str))
        .collect();
    if !enrolled.contains(&"w2") {
        return Err(format!(
            "x not enrolled: {:?}; corrections {:?}; loads {:?}",
            done.report.enrolments, done.report.adaptations, done.plan.loads
        ));
    }
    let x = done.report.workers.iter().find(|r| r.name == "w2").expect("x reported");
    assert!(x.compute_secs > 0.0 && x.products > 0, "x computed products: {x:?}");
    // The table says what x computed, not what the plan gave it.
    let table = done.report.table();
    let row = (table.lines())
        .find(|l| l.starts_with("w2 "))
        .unwrap_or_else(|| panic!("a row for x: {table}"));
    assert!(row.contains(&format!(" {}* ", x.products)), "{table}");
    assert!(table.contains("the plan gave") && table.contains("w2 0"), "{table}");
    Ok(())
}
