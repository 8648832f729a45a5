//! A batch opened before its plan exists, through real workers on
//! 127.0.0.1: the chunk that goes out first is the first chunk of the plan
//! the run reports, nothing else goes out before the rest was planned,
//! and every product is right, on one port, two ports and behind a shared
//! uplink (emulated, so that calibration finds it).

mod common;
use dls_lp::sequence::PortOp;
use dls_lp::{Ports, Strategy};
use dls_master::config::cluster::Cluster;
use dls_master::session::{self, Batch, CalibrateOptions, RunConfig};
use serde_json::Value;
use std::time::Duration;

/// (start µs, worker, products) of the master's measured sends, in order.
fn sends(trace: &Value) -> Vec<(f64, String, u64)> {
    let mut v: Vec<_> = (trace["traceEvents"].as_array().expect("events").iter())
        .filter(|e| e["ph"] == "X" && e["pid"] == 1 && e["tid"] == 0 && e["cat"] == "send")
        .map(|e| {
            (
                e["ts"].as_f64().expect("ts"),
                e["args"]["worker"].as_str().expect("worker").to_string(),
                e["args"]["load"].as_u64().expect("load"),
            )
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opened_batch_sends_its_plans_first_chunk_before_the_plan_exists() {
    let w = common::start_behind(&[(Some(60.0), 2.0), (Some(40.0), 1.0), (Some(30.0), 1.0)], 80.0, true);
    let mut pool = common::connect(&w).await;
    let opts = CalibrateOptions {
        reps: 1,
        max_probe_bytes: 1 << 18,
        timeout: Duration::from_secs(20),
        ..CalibrateOptions::new(24)
    };
    let cal = session::calibrate(pool.links_mut(), &opts).await.expect("calibrates");
    pool.close().await;
    let platform = cal.platform().expect("platform");
    let workers = session::Workers::new(Cluster::from_list_indexed(&w.list()).expect("cluster"), None);
    for (ports, strategy) in [
        (Some(Ports::One), Strategy::Best),
        (Some(Ports::Two), Strategy::Rounds),
        (None, Strategy::Best),
    ] {
        let what = format!("{ports:?} {strategy}");
        let batch = Batch::random(300, 24, 11);
        let cfg = RunConfig {
            ports,
            strategy,
            verify: 4,
            // Open whatever the plan takes.
            open_after: Duration::ZERO,
            ..RunConfig::default()
        };
        let mut sink = batch.memory_sink().expect("memory");
        let done = session::run(&workers, Some(platform.clone()), None, &batch, &cfg, &mut sink, |_| {})
            .await
            .unwrap_or_else(|e| panic!("{what}: {e:#}"));
        common::assert_batch_right(&batch, &sink.0);
        assert_eq!(done.report.verified, 4, "{what}");
        let at = done
            .rest_at
            .unwrap_or_else(|| panic!("{what}: the batch was not opened"));
        let seq = &done.plan.sequence;
        assert_eq!(seq.ops[0], PortOp::Send(0), "{what}: the plan opens with its chunk 0");
        let first = seq.chunks[0];
        let name = &done.platform.workers()[first.worker].name;
        let sent = sends(&done.trace.to_json());
        assert_eq!(
            (&sent[0].1, sent[0].2),
            (name, first.units),
            "{what}: the first send is the plan's first chunk"
        );
        for s in &sent[1..] {
            assert!(
                s.0 >= at * 1e6 - 1.0,
                "{what}: {s:?} went out before the rest was planned ({at} s)"
            );
        }
        assert!(
            done.plan.notes.iter().any(|n| n.starts_with("opening")),
            "{what}: {:?}",
            done.plan.notes
        );
        assert_eq!(done.plan.loads.iter().sum::<u64>(), 300, "{what}");
    }
}
