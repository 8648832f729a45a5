//! End to end: a worker the plan left out is enrolled once the workers it
//! enrolled turn out three times slower than planned.

mod common;
use dls_lp::{Platform, Strategy, Worker};
use dls_master::session::{self, Batch, CalibrateOptions, RunConfig};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_left_out_worker_is_enrolled_when_the_enrolled_fall_behind() {
    // a and b: fast links; x: a link 2.5 times slower, and a fast processor.
    let w = common::start(&[(Some(200.0), 80.0), (Some(200.0), 80.0), (Some(80.0), 2.0)], None);
    let mut pool = common::connect(&w).await;
    let opts = CalibrateOptions {
        timeout: Duration::from_secs(20),
        ports: false,
        ..CalibrateOptions::new(128)
    };
    let truth = session::calibrate(pool.links_mut(), &opts)
        .await
        .expect("calibrates")
        .platform()
        .expect("platform");
    let t = truth.workers();
    // The plan believes a and b compute at least three times faster than
    // they do, fast enough that the two of them fill the port (each
    // computing in 80% of its port time at most): x is left out.
    let believed_w = |x: &Worker| (x.w / 3.0).min(0.8 * (x.c + x.d));
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
    let port_use: f64 = t[..2].iter().map(|x| (x.c + x.d) / believed_w(x)).sum();
    assert!(port_use > 2.0, "a and b fill the port as believed: {port_use:.2}");
    // As they are, x adds at least a tenth (what enrolment asks).
    let rho = |p: &Platform| {
        dls_lp::bound::steady_state(p, dls_lp::Ports::One)
            .expect("bound")
            .throughput
    };
    let (alone, all) = (rho(&truth.subset(&[0, 1]).expect("subset")), rho(&truth));
    assert!(all > 1.15 * alone, "x pays: {alone:.1} vs {all:.1} units/s ({t:?})");

    let batch = Batch::random(1000, 128, 3);
    let cfg = RunConfig {
        strategy: Strategy::Rounds,
        ports: Some(dls_lp::Ports::One),
        verify: 50,
        ..RunConfig::default()
    };
    let done = session::run_batch(&mut pool, &believed, &batch, &cfg, 1, |_| {})
        .await
        .expect("runs");
    assert_eq!(done.plan.loads[2], 0, "the plan left x out: {:?}", done.plan.loads);
    assert_eq!(done.report.verified, 50);
    let computed: u64 = done.report.workers.iter().map(|r| r.products).sum();
    assert_eq!(computed, 1000, "every product computed once");
    assert!(done.report.failures.is_empty(), "{:?}", done.report.failures);
    // Workers the plan left out: x, and b too when a alone fills the port
    // as believed (a and b are alike: either may be the one enrolled).
    let left_out: Vec<String> = (0..3)
        .filter(|&i| done.plan.loads[i] == 0)
        .map(|i| format!("w{i}"))
        .collect();
    let enrolled: Vec<&str> = (done.report.enrolments.iter())
        .flat_map(|e| e.workers.iter().map(String::as_str))
        .collect();
    assert!(
        !enrolled.is_empty() && enrolled.iter().all(|w| left_out.iter().any(|l| l == w)),
        "a left-out worker ({left_out:?}) enrolled: {:?}; corrections: {:?}; loads {:?}",
        done.report.enrolments,
        done.report.adaptations,
        done.plan.loads
    );
    for name in enrolled {
        let r = done.report.workers.iter().find(|r| r.name == name).expect("reported");
        assert!(
            r.compute_secs > 0.0 && r.products > 0,
            "{name} computed products: {r:?}"
        );
    }
    pool.close().await;
}
