//! `dls run` and friends as a user runs them, against worker daemons on
//! 127.0.0.1.

mod common;
use common::cli::{dls, fails, mats, s, tmp};
use dls_master::output::npy;
use dls_protocol::Values;

#[test]
fn run_with_npy_files_writes_c_trace_and_gantt() {
    let w = common::start(&[(Some(200.0), 2.0), (None, 1.0)], Some("tok-0123456789abcdef"));
    let (m, n) = (12usize, 8usize);
    let mut a = vec![0.0; m * n * n];
    let mut b = vec![0.0; m * n * n];
    dls_worker::kernel::fill_random(&mut a, 11);
    dls_worker::kernel::fill_random(&mut b, 12);
    let (pa, pb, pc) = (tmp("a.npy"), tmp("b.npy"), tmp("c.npy"));
    npy::write(&pa, &mats(m, n, n, a.clone())).expect("writes A");
    npy::write(&pb, &mats(m, n, n, b.clone())).expect("writes B");
    let (trace, gantt) = (tmp("t.json"), tmp("g.svg"));
    let list = w.list();
    let started = std::time::Instant::now();
    let (ok, out, err) = dls(
        &[
            "run",
            "--workers",
            &list,
            "--input",
            s(&pa),
            s(&pb),
            "--output",
            s(&pc),
            "--trace",
            s(&trace),
            "--gantt",
            s(&gantt),
            "--verify",
            "4",
            "--json",
        ],
        Some("tok-0123456789abcdef"),
    );
    assert!(ok, "{err}");
    let command_secs = started.elapsed().as_secs_f64();
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
    // What the user waited for: inside the command's own time, the plan's
    // run inside it, the first send (a probe's) before the plan.
    let waited = |k: &str| {
        v["waited"][k]
            .as_f64()
            .unwrap_or_else(|| panic!("waited.{k}: {}", v["waited"]))
    };
    let wall = waited("wall_secs");
    assert!(wall <= command_secs && wall >= v["measured_makespan"].as_f64().expect("makespan"));
    assert!(waited("first_send_secs") <= waited("connect_secs") + waited("calibration_secs"));
    assert!(waited("plan_secs") > 0.0 && waited("plan_secs") + waited("calibration_secs") <= wall);
    assert_eq!(
        waited("calibration_secs"),
        v["probes"]["seconds"].as_f64().expect("probe seconds")
    );
    for key in [
        "strategy",
        "load",
        "size",
        "send_order",
        "return_order",
        "predicted_makespan",
        "measured_makespan",
        "verified",
        "max_abs_error",
        "workers",
    ] {
        assert!(v.get(key).is_some(), "summary lacks {key}");
    }
    assert_eq!(v["load"], 12);
    // No platform: the workers were measured on the batch's first products,
    // which C holds like the others (checked below against the naive
    // products of the whole batch).
    let probed = v["probes"]["products"].as_u64().expect("probes in the summary");
    assert!((2..=6).contains(&probed), "{}", v["probes"]);
    let counted: u64 = (v["workers"].as_array().expect("workers").iter())
        .map(|w| w["products"].as_u64().expect("products"))
        .sum();
    assert_eq!(counted, 12, "every product, probes included, counted once");
    assert_eq!(v["size"], 8);
    assert_eq!(v["verified"], 4);
    let c = npy::read(&pc).expect("reads C");
    assert_eq!((c.count, c.rows, c.cols), (Some(m), n, n));
    let Values::F64(cv) = c.data else {
        panic!("C is float64")
    };
    common::assert_close(&cv, &common::naive_all(&a, &b, m, n), n);
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).expect("trace")).expect("JSON");
    let events = t["traceEvents"].as_array().expect("events");
    assert!(events.iter().any(|e| e["ph"] == "X" && e["args"]["predicted"] == true));
    assert!(events
        .iter()
        .any(|e| e["ph"] == "X" && e["cat"] == "compute" && e["pid"] == 1));
    assert!(std::fs::read_to_string(&gantt).expect("svg").starts_with("<svg"));
    // `dls gantt` redraws the same trace.
    let g2 = tmp("g2.svg");
    let (ok, _, err) = dls(&["gantt", s(&trace), "-o", s(&g2)], None);
    assert!(ok, "{err}");
    let svg = std::fs::read_to_string(&g2).expect("svg");
    assert!(svg.contains("measured"));
    // Titled from the trace's own record of what ran, not its file name.
    assert_eq!(
        t["otherData"]["title"], "12 products of 8×8 float64, best",
        "{}",
        t["otherData"]
    );
    assert!(
        svg.contains("12 products of 8×8 float64, best") && !svg.contains("trace.json"),
        "the chart's title"
    );
}

#[test]
fn calibrate_writes_a_platform_that_plan_and_run_accept() {
    let w = common::start(&[(Some(100.0), 3.0), (None, 1.0)], None);
    let list = w.list();
    let platform = tmp("platform.toml");
    let (ok, _, err) = dls(
        &["calibrate", "--workers", &list, "--size", "16", "-o", s(&platform)],
        None,
    );
    assert!(ok, "{err}");
    let (ok, out, err) = dls(&["plan", "--platform", s(&platform), "--load", "50", "--json"], None);
    assert!(ok, "{err}");
    assert!(out.contains("\"makespan\""));
    let (ok, out, err) = dls(
        &[
            "run",
            "--workers",
            &list,
            "--platform",
            s(&platform),
            "--batch",
            "10",
            "--size",
            "16",
        ],
        None,
    );
    assert!(ok, "{err}");
    assert!(out.contains("measured/predicted"), "{out}");
    // The file says it was measured at n = 16: another size is refused,
    // with the command that measures it again.
    let (ok, _, err) = dls(
        &[
            "run",
            "--workers",
            &list,
            "--platform",
            s(&platform),
            "--batch",
            "4",
            "--size",
            "32",
        ],
        None,
    );
    assert!(
        !ok && err.contains("16×16 float64") && err.contains("dls calibrate --size 32"),
        "{err}"
    );
    // Calibrated at two sizes, the file carries a model of how costs follow
    // the size and serves another one, saying so.
    let scaled = tmp("scaled.toml");
    let (ok, _, err) = dls(
        &["calibrate", "--workers", &list, "--sizes", "8,16", "-o", s(&scaled)],
        None,
    );
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&scaled).expect("written");
    assert!(text.contains("send_per_byte") && text.contains("speed = "), "{text}");
    let (ok, out, err) = dls(
        &[
            "run",
            "--workers",
            &list,
            "--platform",
            s(&scaled),
            "--batch",
            "6",
            "--size",
            "12",
            "--json",
        ],
        None,
    );
    assert!(ok && err.contains("rescaled to 12×12 float64"), "{err}");
    assert!(out.contains("\"predicted_makespan\""), "{out}");
    // Costs given: nothing measured before the plan, the first send after it.
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
    let waited = |k: &str| {
        v["waited"][k]
            .as_f64()
            .unwrap_or_else(|| panic!("waited.{k}: {}", v["waited"]))
    };
    assert_eq!(waited("calibration_secs"), 0.0);
    assert!(waited("first_send_secs") >= waited("connect_secs") + waited("plan_secs"));
    assert!(waited("wall_secs") >= waited("first_send_secs") + v["measured_makespan"].as_f64().expect("makespan"));
    let (ok, _, err) = dls(
        &["calibrate", "--workers", &list, "--sizes", "16,8", "-o", s(&scaled)],
        None,
    );
    assert!(!ok && err.contains("increasing order"), "{err}");
}

#[test]
fn bad_input_fails_clearly() {
    let w = common::start(&[(None, 1.0)], Some("right-0123456789abcdef"));
    let list = w.list();
    // A port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        l.local_addr().expect("addr").to_string()
    };
    fails(
        &["run", "--workers", &closed, "--batch", "4", "--size", "4"],
        None,
        "cannot connect",
    );
    fails(
        &[
            "run",
            "--workers",
            &list,
            "--batch",
            "4",
            "--size",
            "4",
            "--chunk-mb",
            "0",
        ],
        None,
        "--chunk-mb",
    );
    // Encryption needs a token; with the worker's, the run is encrypted
    // end to end.
    fails(
        &["run", "--workers", &list, "--batch", "4", "--size", "4", "--encrypt"],
        None,
        "--encrypt needs a token",
    );
    let (ok, _, err) = dls(
        &[
            "run",
            "--workers",
            &list,
            "--batch",
            "4",
            "--size",
            "4",
            "--encrypt",
            "--verify",
            "4",
        ],
        Some("right-0123456789abcdef"),
    );
    assert!(ok, "an encrypted run: {err}");
    fails(
        &["run", "--workers", &list, "--batch", "4", "--size", "4"],
        Some("wrong-0123456789abcdef"),
        "different tokens",
    );
    fails(
        &["run", "--workers", &list, "--batch", "4", "--size", "4"],
        None,
        "wrong or missing token",
    );
    fails(
        &["run", "--workers", &list, "--batch", "0", "--size", "4"],
        Some("right-0123456789abcdef"),
        "at least one product",
    );
    fails(
        &["experiment", "adapt", "--reps", "0"],
        None,
        "--reps must be at least 1",
    );
    fails(
        &["experiment", "adapt", "--workers", &list],
        Some("right-0123456789abcdef"),
        "runs on local workers only",
    );
    let empty = tmp("empty.toml");
    std::fs::write(&empty, "").expect("writes");
    fails(
        &["run", "--cluster", s(&empty), "--batch", "4", "--size", "4"],
        None,
        "no worker",
    );
    // .npy of the wrong dtype and of the wrong shape.
    let bad = tmp("i4.npy");
    let header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2, 2), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let pad = 64 - (10 + header.len() + 1) % 64;
    bytes.extend(((header.len() + pad + 1) as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(std::iter::repeat_n(b' ', pad));
    bytes.push(b'\n');
    bytes.extend([0u8; 32]);
    std::fs::write(&bad, &bytes).expect("writes");
    fails(
        &["run", "--workers", &list, "--input", s(&bad), s(&bad)],
        Some("right-0123456789abcdef"),
        "neither float32 nor float64",
    );
    let (a, b) = (tmp("a2.npy"), tmp("b3.npy"));
    npy::write(&a, &mats(2, 2, 2, vec![0.0; 8])).expect("writes");
    npy::write(&b, &mats(3, 2, 2, vec![0.0; 12])).expect("writes");
    fails(
        &["run", "--workers", &list, "--input", s(&a), s(&b)],
        Some("right-0123456789abcdef"),
        "must pair up",
    );
    fails(
        &["run", "--workers", &list, "--input", s(&a), s(&a), "--size", "3"],
        Some("right-0123456789abcdef"),
        "--size says 3×3",
    );
}

#[test]
fn inputs_that_could_crash_the_master_fail_with_one_clear_line() {
    // Nothing listens here: every case must fail before connecting.
    let nobody = "127.0.0.1:9";
    let tok = Some("tok-0123456789abcdef");
    let run = |extra: &[&str], needle: &str| {
        let mut args = vec!["run", "--workers", nobody];
        args.extend_from_slice(extra);
        fails(&args, tok, needle);
    };
    run(
        &["--batch", "18446744073709551615", "--size", "1"],
        "--batch 18446744073709551615 --size 1: 18446744073709551615 products of",
    );
    run(
        &["--batch", "4", "--size", "4294967297"],
        "larger than the protocol carries",
    );
    run(
        &["--batch", "4", "--shape", "4,0,2"],
        "every dimension must be at least 1",
    );
    run(&["--batch", "4", "--shape", "4,2"], "give n,k,m");
    run(
        &["--batch", "4", "--size", "4", "--dtype", "int8"],
        "float32 or float64",
    );
    run(
        &["--batch", "4", "--size", "4", "--shape", "4,4,4"],
        "cannot be used with",
    );
    run(&["--batch", "1", "--size", "100000"], "more than the");
    // A header claiming a huge shape over a tiny file.
    let a = tmp("huge-header.npy");
    let mut h = "{'descr': '<f8', 'fortran_order': False, 'shape': (2000000, 2560, 2560), }".to_string();
    h.push_str(&" ".repeat((64 - (10 + h.len() + 1) % 64) % 64));
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((h.len() as u16).to_le_bytes());
    bytes.extend(h.as_bytes());
    bytes.extend([0u8; 64]);
    std::fs::write(&a, bytes).expect("writes");
    run(&["--input", s(&a), s(&a)], "fewer values than its shape");
    // Tokens too short to be safe.
    fails(
        &["run", "--workers", nobody, "--batch", "1", "--size", "2"],
        Some("abc"),
        "use at least 16",
    );
}

#[test]
fn outputs_are_checked_before_any_work() {
    let nobody = "127.0.0.1:9";
    let tok = Some("tok-0123456789abcdef");
    let dir = tmp("out-checks");
    std::fs::create_dir_all(&dir).expect("dir");
    let a = dir.join("a.npy");
    let m = mats(1, 2, 2, vec![1.0, 2.0, 3.0, 4.0]);
    npy::write(&a, &m).expect("writes");
    let missing = dir.join("no-such-dir/c.npy");
    let cases: [(&[&str], &str); 5] = [
        (&["--output", s(&missing)], "does not exist"),
        (&["--output", s(&dir)], "is a directory"),
        (&["--input", s(&a), s(&a), "--output", s(&a)], "is also an input"),
        (&["--trace", s(&missing)], "--trace"),
        (&["--gantt", s(&dir)], "--gantt"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["run", "--workers", nobody, "--batch", "1", "--size", "2"];
        if extra.contains(&"--input") {
            args.truncate(3);
        }
        args.extend_from_slice(extra);
        // The worker is unreachable: failing on the path, not on the
        // connection, shows the check came first.
        fails(&args, tok, needle);
    }
    assert_eq!(npy::read(&a).expect("A untouched"), m);
}

/// float32 rectangular products with one shared B, from `.npy` files
/// through `dls run` on real workers: C comes back float32, of shape
/// (M, n, m), right to float32 rounding against the naive product in
/// float64; the summary says the shape and type; random inputs of a
/// `--shape` and `--dtype` run too.
#[test]
fn rectangular_float32_shared_b_files_run_through_the_cli() {
    let w = common::start(&[(Some(200.0), 2.0), (None, 1.0)], None);
    let (m, n, k, cols) = (9usize, 6usize, 20usize, 5usize);
    let (mut a, mut b) = (vec![0.0; m * n * k], vec![0.0; k * cols]);
    dls_worker::kernel::fill_random(&mut a, 21);
    dls_worker::kernel::fill_random(&mut b, 22);
    let (a32, b32): (Vec<f32>, Vec<f32>) = (
        a.iter().map(|&x| x as f32).collect(),
        b.iter().map(|&x| x as f32).collect(),
    );
    let (pa, pb, pc) = (tmp("ra.npy"), tmp("rb.npy"), tmp("rc.npy"));
    let file = |count, rows, cols, data: &[f32]| npy::Matrices {
        count,
        rows,
        cols,
        data: Values::F32(data.to_vec()),
    };
    npy::write(&pa, &file(Some(m), n, k, &a32)).expect("writes A");
    npy::write(&pb, &file(None, k, cols, &b32)).expect("writes B");
    let list = w.list();
    let args = [
        "run",
        "--workers",
        &list,
        "--input",
        s(&pa),
        s(&pb),
        "--output",
        s(&pc),
        "--verify",
        "9",
        "--json",
    ];
    let (ok, out, err) = dls(&args, None);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
    assert_eq!(v["shape"], serde_json::json!([6, 20, 5]));
    assert_eq!(
        (v["dtype"].as_str(), v["shared_b"].as_bool()),
        (Some("float32"), Some(true))
    );
    assert_eq!(v["verified"], 9);
    let c = npy::read(&pc).expect("reads C");
    assert_eq!((c.count, c.rows, c.cols), (Some(m), n, cols));
    let Values::F32(c) = c.data else {
        panic!("C keeps float32")
    };
    let b64: Vec<f64> = b32.iter().map(|&x| x as f64).collect();
    for i in 0..m {
        let ai: Vec<f64> = a32[i * n * k..(i + 1) * n * k].iter().map(|&x| x as f64).collect();
        let want = dls_worker::kernel::naive_dims(&ai, &b64, dls_worker::kernel::Dims { n, k, m: cols });
        for (j, y) in want.iter().enumerate() {
            let x = c[i * n * cols + j] as f64;
            // |entries| < 1: k·ε of float32 bounds the rounding.
            assert!(
                (x - y).abs() <= (k as f64 + 2.0) * f32::EPSILON as f64 * k as f64,
                "product {i}: {x} vs {y}"
            );
        }
    }
    // A given as B: its matrices have the wrong number of rows.
    fails(
        &["run", "--workers", &list, "--input", s(&pa), s(&pa), "--shared-b"],
        None,
        "B needs 20 rows",
    );
    let (ok, out, err) = dls(
        &[
            "run",
            "--workers",
            &list,
            "--batch",
            "7",
            "--shape",
            "3,8,2",
            "--dtype",
            "float32",
            "--json",
        ],
        None,
    );
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON summary");
    assert_eq!(
        (v["shape"].clone(), v["dtype"].as_str()),
        (serde_json::json!([3, 8, 2]), Some("float32"))
    );
}

/// `--learn`: the first run calibrates and records what it measured, per
/// products; a second run of the same products plans from the model
/// without calibrating; other products get a model of their own.
#[test]
fn a_second_learn_run_of_the_same_products_does_not_calibrate() {
    let w = common::start(&[(None, 1.0), (None, 1.0)], None);
    let list = w.list();
    let model = tmp("learned.json");
    let _ = std::fs::remove_file(&model);
    let args = |size: &str| {
        vec![
            "run".to_string(),
            "--workers".into(),
            list.clone(),
            "--batch".into(),
            "20".into(),
            "--size".into(),
            size.into(),
            "--learn".into(),
            "--model".into(),
            s(&model).into(),
        ]
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        dls(&a, None)
    };
    let (ok, _, err) = run(args("8"));
    assert!(ok && err.contains("calibrating"), "{err}");
    let (ok, _, err) = run(args("8"));
    assert!(ok, "{err}");
    assert!(!err.contains("calibrating"), "the second run calibrated again: {err}");
    assert!(err.contains("costs learned from 1 earlier batch"), "{err}");
    // The model is for 8×8 float64 products: others are refused by name.
    let (ok, _, err) = run(args("16"));
    assert!(!ok && err.contains("holds costs for products 8, not 16"), "{err}");
}

/// Which workers `dls calibrate` measured under load and by what factors,
/// on stderr as in the platform file it wrote. Behind an emulated
/// full-duplex uplink (two lanes) the fastest links' workers are measured
/// under load; one calibration in a few on this machine reads the network
/// otherwise (see `ports.rs`), so a second is made when the first
/// measured none under load.
#[test]
fn calibrate_says_which_workers_it_measured_under_load() {
    let mut measured = 0;
    for attempt in 0..2 {
        let w = common::start_behind(&[(Some(40.0), 1.0), (Some(40.0), 1.0), (Some(20.0), 1.0)], 40.0, true);
        let platform = tmp(&format!("under-load-{attempt}.toml"));
        let (ok, _, err) = dls(
            &["calibrate", "--workers", &w.list(), "--size", "64", "-o", s(&platform)],
            None,
        );
        assert!(ok, "{err}");
        let file = std::fs::read_to_string(&platform).expect("platform written");
        let table: toml::Table = toml::from_str(&file).expect("platform is TOML");
        // Each step said as it ends, in the order they run.
        let at = |what: &str| err.lines().position(|l| l.starts_with(what));
        let links = at("links and computing measured (").expect("links step said");
        let port = at("port model measured (").expect("port step said");
        assert!(links < port, "{err}");
        for w in table["worker"].as_array().expect("workers") {
            let name = w["name"].as_str().expect("name");
            let said = err.lines().find(|l| l.starts_with(&format!("{name}: under load")));
            let step = at(&format!("{name}: costs under load measured ("));
            match w.get("under_load").and_then(|u| u.as_array()) {
                Some(f) => {
                    let f: Vec<f64> = f.iter().map(|x| x.as_float().expect("a factor")).collect();
                    let want = format!("send {:.2}x, compute {:.2}x, return {:.2}x", f[0], f[1], f[2]);
                    assert!(said.is_some_and(|l| l.contains(&want)), "{name}: {want} in {err}");
                    assert!(
                        step.is_some_and(|i| i > port),
                        "{name}: its step said after the port's: {err}"
                    );
                    measured += 1;
                }
                None => {
                    assert!(said.is_none(), "{name} not measured under load: {err}");
                    assert!(step.is_none(), "{name} not measured under load: {err}");
                }
            }
        }
        if measured > 0 {
            return;
        }
    }
    panic!("no worker measured under load in two calibrations behind a full-duplex uplink");
}
