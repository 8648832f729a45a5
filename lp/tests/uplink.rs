//! The steady-state bound behind a shared uplink (a switched network):
//! its closed form against the LP written constraint by constraint, and
//! its shares against every constraint recomputed from them.

mod common;
use common::*;
use dls_lp::bound::{self, Uplink};
use dls_lp::Ports;
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
