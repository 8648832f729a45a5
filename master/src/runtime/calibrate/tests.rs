use super::model::sizes::per_byte;
use super::*;

/// A worker measured exactly: sends at `per_byte` plus `latency`,
/// returns at twice the rate, computing at `flops_per_s`.
fn measured(form: Form, per_byte: f64, latency: f64, flops_per_s: f64) -> Calibration {
    let w = form.shape.flops() / flops_per_s;
    let samples: Vec<(u64, f64, f64, f64)> = [1u64, 2, 4, 8]
        .iter()
        .map(|&k| {
            let k_f = k as f64;
            let s = latency + k_f * form.in_bytes(1) as f64 * per_byte;
            let r = latency + k_f * form.out_bytes(1) as f64 * 2.0 * per_byte;
            (k, s, k_f * w, r)
        })
        .collect();
    let line = |i: usize| {
        fit(&samples
            .iter()
            .map(|p| (p.0 as f64, [p.1, p.2, p.3][i]))
            .collect::<Vec<_>>())
    };
    Calibration {
        form,
        workers: vec![WorkerCalibration {
            name: "w".into(),
            send: line(0),
            compute: line(1),
            ret: line(2),
            samples,
            max_load: 100,
            under_load: None,
            warnings: Vec::new(),
        }],
        ports: None,
    }
}

#[test]
fn a_scaling_model_is_fitted_from_calibrations_at_several_sizes() {
    let cals = [
        measured(Form::square(64), 1e-9, 1e-4, 5e9),
        measured(Form::square(256), 1e-9, 1e-4, 2e10),
    ];
    let s = scaling(&cals).expect("fits");
    assert_eq!(s.len(), 1);
    assert!((s[0].send_per_byte - 1e-9).abs() < 1e-15, "{}", s[0].send_per_byte);
    assert!((s[0].return_per_byte - 2e-9).abs() < 1e-15, "{}", s[0].return_per_byte);
    assert_eq!(s[0].speed.len(), 2);
    assert!((s[0].speed[0].0 - 64.0).abs() < 1e-9 && (s[0].speed[0].1 - 5e9).abs() < 1.0);
    assert!((s[0].speed[1].0 - 256.0).abs() < 1e-9 && (s[0].speed[1].1 - 2e10).abs() < 1.0);
    // The file written says so, and serves 128×128 with the costs the
    // model implies: bytes at the fitted rates, flops at the speed
    // halfway in log size (1.25e10 flop/s).
    let text = cals[1].to_toml_with(Some(&s)).expect("toml");
    let dir = std::env::temp_dir().join(format!("dls-scaling-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("p.toml");
    std::fs::write(&path, text).expect("writes");
    let (p, note) =
        crate::config::platform_file::PlatformFile::load_for(&path, &Form::square(128)).expect("serves 128");
    assert!(note.is_some());
    let w = &p.workers()[0];
    let (bin, bout) = (2.0 * 128.0 * 128.0 * 8.0, 128.0 * 128.0 * 8.0);
    assert!((w.c / (bin * 1e-9) - 1.0).abs() < 1e-6, "{}", w.c);
    assert!((w.d / (bout * 2e-9) - 1.0).abs() < 1e-6, "{}", w.d);
    assert!((w.w / (2.0 * 128f64.powi(3) / 1.25e10) - 1.0).abs() < 1e-6, "{}", w.w);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sizes_probed_for_computing_alone_leave_the_transfer_rates_as_measured() {
    // Compute probes go on past the transfer probes (their transfers NaN):
    // the rates per byte come from the sizes that moved data, never a NaN
    // turned into a cost of nothing.
    let mut cals = [
        measured(Form::square(64), 1e-9, 1e-4, 5e9),
        measured(Form::square(256), 1e-9, 1e-4, 2e10),
    ];
    for cal in &mut cals {
        let w = cal.form.shape.flops() / 5e9;
        cal.workers[0]
            .samples
            .extend([64u64, 512].map(|k| (k, f64::NAN, k as f64 * w, f64::NAN)));
    }
    let s = scaling(&cals).expect("fits");
    assert!((s[0].send_per_byte - 1e-9).abs() < 1e-15, "{}", s[0].send_per_byte);
    assert!((s[0].return_per_byte - 2e-9).abs() < 1e-15, "{}", s[0].return_per_byte);
    // A latency that hides the rate (every probe as long): the largest
    // probe's seconds a byte, an upper bound.
    let flat = [(1e3, 1e-3), (2e3, 1e-3), (4e3, 1e-3)];
    assert!((per_byte(&flat) - 1e-3 / 4e3).abs() < 1e-18);
}

#[test]
fn least_squares_against_closed_forms() {
    let f = fit(&[(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)]);
    assert!((f.slope - 2.0).abs() < 1e-12 && (f.intercept - 1.0).abs() < 1e-12 && (f.r2 - 1.0).abs() < 1e-12);
    // Points (0,0), (1,1), (2,1): least squares gives slope 1/2,
    // intercept 1/6, R² = 3/4; residuals -1/6, 1/3, -1/6, so σ² = 1/6
    // and the intercept's standard error is √(σ²·(1/3 + 1/2)) ≈ 0.37:
    // 1/6 is noise, and the line through the origin has slope
    // Σxy/Σx² = 3/5 (R² of the free line kept).
    let f = fit(&[(0.0, 0.0), (1.0, 1.0), (2.0, 1.0)]);
    assert!((f.slope - 0.6).abs() < 1e-12, "{f:?}");
    assert_eq!(f.intercept, 0.0);
    assert!((f.r2 - 0.75).abs() < 1e-12);
    // y = 10 + x ± 0.1 at x = 1, 2, 4, 8: residuals of the free line are
    // tiny against an intercept of 10, which stays (within the noise).
    let f = fit(&[(1.0, 11.1), (2.0, 11.9), (4.0, 14.1), (8.0, 17.9)]);
    assert!(
        (f.intercept - 10.0).abs() < 0.3 && (f.slope - 1.0).abs() < 0.05,
        "{f:?}"
    );
    // y = 0.05 + x ± 1 at the same sizes: the intercept is noise.
    let f = fit(&[(1.0, 2.05), (2.0, 1.05), (4.0, 5.05), (8.0, 7.05)]);
    assert_eq!(f.intercept, 0.0, "{f:?}");
    let f = fit(&[(4.0, 2.0), (4.0, 2.0)]);
    assert_eq!((f.slope, f.intercept), (0.5, 0.0));
}

#[test]
fn relative_least_squares_against_closed_forms() {
    // y = 0.5 + 2x exactly: costs per unit 2 + 0.5/x, a line in 1/x.
    let f = fit_relative(&[(1.0, 2.5), (2.0, 4.5), (4.0, 8.5), (8.0, 16.5)]);
    assert!(
        (f.slope - 2.0).abs() < 1e-12 && (f.intercept - 0.5).abs() < 1e-12,
        "{f:?}"
    );
    assert!((f.r2 - 1.0).abs() < 1e-12);
    // Costs per unit 1, 1, 1, 1, 0.97, 0.96 at sizes 1 to 32: a few
    // percent of noise on the large probes only. Plain least squares makes
    // that a latency of 0.157 (2.26 standard errors, short of the 2.78 of
    // four degrees of freedom: dropped); on the costs per unit it is 1.44
    // standard errors, noise, and the cost per unit is their mean, 5.93 / 6.
    let per_unit = [1.0, 1.0, 1.0, 1.0, 0.97, 0.96];
    let pts: Vec<(f64, f64)> = per_unit
        .iter()
        .enumerate()
        .map(|(i, &u)| {
            let k = f64::from(1u32 << i);
            (k, k * u)
        })
        .collect();
    let plain = fit(&pts);
    assert_eq!(plain.intercept, 0.0, "{plain:?}");
    let f = fit_relative(&pts);
    assert_eq!(f.intercept, 0.0, "{f:?}");
    assert!((f.slope - 5.93 / 6.0).abs() < 1e-12, "{f:?}");
    assert_eq!(f.r2, plain.r2);
    // Fewer than three points, or a size of zero: plain least squares.
    assert_eq!(fit_relative(&[(1.0, 3.0), (2.0, 5.0)]), fit(&[(1.0, 3.0), (2.0, 5.0)]));
    let with_zero = [(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)];
    assert_eq!(fit_relative(&with_zero), fit(&with_zero));
}

#[test]
fn three_sizes_need_a_strong_latency() {
    // Costs per unit 1.10, 1.00, 1.00 at 1, 2 and 4 units: in 1/k a
    // latency of 1/7 = 0.143 at 2.89 standard errors (slope 0.95, residual
    // sum of squares 1/1400). With one degree of freedom a 95% test asks
    // 12.7: noise, and the cost per unit is the mean, 3.1 / 3.
    let f = fit_relative(&[(1.0, 1.10), (2.0, 2.00), (4.0, 4.00)]);
    assert_eq!(f.intercept, 0.0, "{f:?}");
    assert!((f.slope - 3.1 / 3.0).abs() < 1e-12, "{f:?}");
    // A real latency stands out even so: 0.5 + 2k, within 0.1% noise.
    let f = fit_relative(&[(1.0, 2.5), (2.0, 4.501), (4.0, 8.499)]);
    assert!((f.intercept - 0.5).abs() < 0.01, "{f:?}");
    // The table's ends.
    assert_eq!(
        (t95(0), t95(1), t95(4), t95(30), t95(31)),
        (f64::INFINITY, 12.706, 2.776, 2.042, 1.96)
    );
}

#[test]
fn repetitions_that_disagree_make_a_latency_noise() {
    // Medians exactly on 0.01 + 0.125·k at k = 1..16: no residual, so the
    // points alone call the 10 ms intercept a latency.
    let pts: Vec<(f64, f64)> = [1.0, 2.0, 4.0, 8.0, 16.0]
        .iter()
        .map(|&k| (k, 0.01 + 0.125 * k))
        .collect();
    let f = fit_relative_judged(&pts, Scatter::default());
    assert!(
        (f.intercept - 0.01).abs() < 1e-12 && (f.slope - 0.125).abs() < 1e-12,
        "{f:?}"
    );
    // Three probes of one unit took 35, 135 and 235 ms (a quota's 100 ms
    // periods): squared deviations 0.02 over 2 degrees of freedom, so a
    // median varies by 0.01·(π/2)/3; with Σ(1/k − mean)² = 0.58125 the
    // intercept's standard error is √(0.005236/0.58125) = 0.0949, and
    // t(2) = 4.303 asks 0.408: noise. The cost per unit is then the mean of
    // the costs per unit.
    let mut wide = Scatter::default();
    wide.add(1, &[0.035, 0.135, 0.235]);
    assert!(
        (wide.sum_sq - 0.02).abs() < 1e-12 && wide.dof == 2 && wide.reps == 3,
        "{wide:?}"
    );
    let f = fit_relative_judged(&pts, wide);
    let mean = pts.iter().map(|p| p.1 / p.0).sum::<f64>() / 5.0;
    assert_eq!(f.intercept, 0.0, "{f:?}");
    assert!((f.slope - mean).abs() < 1e-12, "{f:?}");
    // Repetitions within 0.1 ms of each other (3 degrees of freedom):
    // standard error 7.8e-5, t(3) = 3.182 asks 2.5e-4, and the 10 ms
    // latency stands.
    let mut tight = Scatter::default();
    tight.add(1, &[0.1349, 0.135, 0.1351]);
    tight.add(2, &[0.26, 0.26]);
    assert_eq!((tight.dof, tight.reps), (3, 3));
    let f = fit_relative_judged(&pts, tight);
    assert!((f.intercept - 0.01).abs() < 1e-12, "{f:?}");
    // A single probe per size says nothing about repetitions.
    let mut one = Scatter::default();
    one.add(4, &[0.5]);
    assert_eq!(one, Scatter::default());
}

#[test]
fn medians_of_odd_and_even_counts() {
    assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(vec![4.0, 1.0]), 2.5, "the middle of two, not the larger");
    assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    assert_eq!(median(vec![7.0]), 7.0);
}

#[test]
fn costs_under_load_scale_the_platform_and_are_written_down() {
    let mut cal = measured(Form::square(64), 1e-9, 0.0, 5e9);
    let alone = cal.platform().expect("valid").workers()[0].clone();
    cal.workers[0].under_load = Some([1.25, 1.5, 1.0]);
    let p = cal.platform().expect("valid");
    let w = &p.workers()[0];
    assert!((w.c - 1.25 * alone.c).abs() < 1e-15 && (w.w - 1.5 * alone.w).abs() < 1e-15 && w.d == alone.d);
    let toml = cal.to_toml().expect("writes");
    assert!(toml.contains("send 1.25x, compute 1.50x, return 1.00x"), "{toml}");
    // The file holds the costs under load and their factors: it loads as
    // the platform above, and one port takes the factors out again.
    let q = crate::config::platform_file::PlatformFile::parse(&toml, "test").expect("parses");
    assert!((q.workers()[0].c - w.c).abs() < 1e-12 * w.c, "{:?}", q.workers());
    assert_eq!(q.workers()[0].under_load, Some([1.25, 1.5, 1.0]));
    let one = q.for_ports(dls_lp::Ports::One);
    assert!(
        (one.workers()[0].c - alone.c).abs() < 1e-12 * alone.c
            && (one.workers()[0].w - alone.w).abs() < 1e-12 * alone.w
    );
    // A factor below 1 is not a cost under load: refused, by name.
    let bad = toml.replace("under_load = [1.25, 1.5, 1.0]", "under_load = [0.5, 1.5, 1.0]");
    assert_ne!(bad, toml, "the file spells the factors as expected: {toml}");
    let e = crate::config::platform_file::PlatformFile::parse(&bad, "test").expect_err("refused");
    assert!(format!("{e:#}").contains("under_load"), "{e:#}");
    // Above the most a file may hold (what calibration clamps to): refused,
    // naming the bound.
    let huge = toml.replace("under_load = [1.25, 1.5, 1.0]", "under_load = [1.25, 2e7, 1.0]");
    let e = crate::config::platform_file::PlatformFile::parse(&huge, "test").expect_err("refused");
    assert!(
        format!("{e:#}").contains("under_load") && format!("{e:#}").contains("1e6"),
        "{e:#}"
    );
}

/// The port model of three loopback workers (links of 40, 40 and 20 MB/s)
/// behind an emulated uplink of 40 MB/s, `duplex` or not, measured as a
/// run measures it, on link costs that claim every link twice as fast as
/// it is (a node's probe sent in a burst its processor quota pays for
/// after).
async fn ports_on_stale_costs(duplex: bool) -> PortFindings {
    use crate::runtime::local::{start_behind, Emulated, EmulatedUplink};
    let form = Form::square(64);
    let specs: Vec<Emulated> = [("a", 40.0), ("b", 40.0), ("c", 20.0)]
        .iter()
        .map(|&(name, rate)| Emulated {
            name: name.into(),
            link_rate: Some(rate),
            slowdown: 1.0,
            speed_change: None,
            memory: None,
        })
        .collect();
    let uplink = EmulatedUplink { rate: 40.0, duplex };
    let workers = start_behind(&specs, Default::default(), Some(uplink))
        .await
        .expect("local workers");
    let mut links = Vec::new();
    for w in &workers.cluster.worker {
        let link = crate::runtime::link::connect(&w.name, &w.address, None, Default::default()).await;
        links.push(link.expect("connects"));
    }
    // Their true costs a unit (bytes over the link's rate), halved.
    let costs: Vec<(f64, f64)> = [40e6, 40e6, 20e6]
        .iter()
        .map(|&r| (form.in_bytes(1) as f64 / r / 2.0, form.out_bytes(1) as f64 / r / 2.0))
        .collect();
    let found = ports_of(&mut links, &costs, &CalibrateOptions::within_run(form)).await;
    workers.stop().await;
    found.expect("measured")
}

/// A port probe takes each transfer's time alone from the link probes
/// when they say less; where that makes the uplink look less than full
/// duplex, the transfers are timed alone again and the overlap is theirs
/// now. Costs that claim the links twice as fast as they are then still
/// find a full-duplex uplink full duplex (against them alone the
/// transfers at once look twice as long), and a half-duplex one half.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_link_costs_do_not_hide_a_full_duplex_uplink() {
    // Emulated on two cores beside the rest of the suite: a second look
    // where the first falls across the boundary.
    let mut full = ports_on_stale_costs(true).await;
    if full.overlap < TUNING.duplex {
        full = ports_on_stale_costs(true).await;
    }
    assert!(
        full.overlap >= TUNING.duplex && full.uplink.is_some_and(|u| u.duplex),
        "{full:?}"
    );
    let mut half = ports_on_stale_costs(false).await;
    if half.overlap >= TUNING.duplex {
        half = ports_on_stale_costs(false).await;
    }
    assert!(
        half.overlap < TUNING.duplex && !half.uplink.is_some_and(|u| u.duplex),
        "{half:?}"
    );
}

/// A phase whose time is all latency (the slope fits at or below zero, as
/// on a loaded machine or a fast worker with small products) gets the
/// largest probe's seconds a unit, latency included, not a cost clamped to
/// nothing that later factors would multiply by a million.
#[test]
fn a_slope_lost_in_the_latency_becomes_the_largest_probes_cost_a_unit() {
    // Sends: about 10 ms whatever the size, less the larger (noise).
    // Compute: a clean 2 ms a unit. Returns: 5 ms a message.
    let samples = vec![
        (1, 0.0110, 0.002, 0.005),
        (2, 0.0105, 0.004, 0.005),
        (4, 0.0100, 0.008, 0.005),
        (8, 0.0090, 0.016, 0.005),
    ];
    let w = finish("w", samples, [Scatter::default(); 3], 100);
    let close = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-9;
    assert!(close(w.send.slope, 0.009 / 8.0), "send {:?}", w.send);
    assert!(close(w.ret.slope, 0.005 / 8.0), "return {:?}", w.ret);
    assert_eq!((w.send.intercept, w.ret.intercept), (0.0, 0.0));
    assert!(close(w.compute.slope, 0.002), "compute {:?}", w.compute);
    let said = w.warnings.join("\n");
    assert!(
        said.contains("send: cost per unit not separable from its latency"),
        "{said}"
    );
    assert!(said.contains("return: cost per unit not separable"), "{said}");
    assert!(!said.contains("compute: cost per unit"), "{said}");
}
