//! Calibration tells the port models apart on emulated networks: the
//! master's uplink as one port (half duplex, no faster than a link), as two
//! ports (full duplex, no faster than a link), shared (full duplex, faster
//! than any link, slower than all together), and absent (private links).

mod common;
use dls_master::session::{self, CalibrateOptions};
use std::time::Duration;

/// Three workers with links of 40, 40 and 20 MB/s.
const LINKS: [(Option<f64>, f64); 3] = [(Some(40.0), 1.0), (Some(40.0), 1.0), (Some(20.0), 1.0)];

/// Products of 64×64 float64: 65,536 bytes sent a unit, 32,768 returned.
const IN: f64 = 65_536.0;
const OUT: f64 = 32_768.0;

async fn measure(w: &common::Workers) -> session::Calibration {
    let mut pool = common::connect(w).await;
    let opts = CalibrateOptions {
        timeout: Duration::from_secs(20),
        ..CalibrateOptions::new(64)
    };
    let cal = session::calibrate(pool.links_mut(), &opts).await.expect("calibrates");
    pool.close().await;
    cal
}

/// `got` within `tol` (relative) of `want`.
fn near(got: f64, want: f64, tol: f64) -> bool {
    (got / want - 1.0).abs() <= tol
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calibration_tells_the_port_models_apart() {
    // One port: a half-duplex uplink at the fastest link's rate.
    let cal = measure(&common::start_behind(&LINKS, 40.0, false)).await;
    let p = cal.ports.as_ref().expect("measured");
    assert_eq!(p.model, "one port", "{p:?}");
    assert!(p.overlap < 1.25 && p.send_gain < 1.15, "{p:?}");
    assert_eq!(cal.platform().expect("platform").measured_ports(), dls_lp::Ports::One);

    // Two ports: full duplex at the fastest link's rate each way.
    let cal = measure(&common::start_behind(&LINKS, 40.0, true)).await;
    let p = cal.ports.as_ref().expect("measured");
    assert_eq!(p.model, "two ports (full duplex)", "{p:?}");
    assert!(p.overlap > 1.75, "{p:?}");

    // Shared: 70 MB/s each way, for links that carry 100 MB/s together.
    let cal = measure(&common::start_behind(&LINKS, 70.0, true)).await;
    let p = cal.ports.as_ref().expect("measured");
    assert_eq!(p.model, "shared uplink (full duplex)", "{p:?}");
    let u = p.uplink.expect("an uplink");
    assert!(
        near(u.send, IN / 70e6, 0.15),
        "send {} s a unit against {}",
        u.send,
        IN / 70e6
    );
    assert!(
        near(u.ret, OUT / 70e6, 0.15),
        "return {} s a unit against {}",
        u.ret,
        OUT / 70e6
    );
    assert_eq!(
        cal.platform().expect("platform").measured_ports(),
        dls_lp::Ports::Shared(u)
    );

    // Private links, nothing shared: the uplink carries all three at once.
    let cal = measure(&common::start(&LINKS, None)).await;
    let p = cal.ports.as_ref().expect("measured");
    assert_eq!(p.model, "shared uplink (full duplex)", "{p:?}");
    let u = p.uplink.expect("an uplink");
    assert!(
        near(u.send, IN / 100e6, 0.15),
        "send {} s a unit against {}",
        u.send,
        IN / 100e6
    );
}
