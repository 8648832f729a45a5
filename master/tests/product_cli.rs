//! `dls run` with one large product, as a user runs it: two 2-D `.npy`
//! files (one of them in Fortran order, float32) in, C out, checked
//! against the textbook loop; `--product` with random inputs and its JSON
//! summary; mistakes named.

mod common;

use common::cli::{dls, fails, s, tmp};
use dls_master::output::npy;
use dls_protocol::Values;

/// A float32 (rows, cols) file; in Fortran order if `fortran`.
fn write_f32(path: &std::path::Path, rows: usize, cols: usize, data: &[f64], fortran: bool) {
    let values: Vec<f32> = match fortran {
        false => data.iter().map(|&v| v as f32).collect(),
        true => (0..cols)
            .flat_map(|j| (0..rows).map(move |i| (i, j)))
            .map(|(i, j)| data[i * cols + j] as f32)
            .collect(),
    };
    let mats = npy::Matrices {
        count: None,
        rows,
        cols,
        data: Values::F32(values),
    };
    npy::write(path, &mats).expect("writes");
    if fortran {
        // Same header length: "False" becomes "True ".
        let mut bytes = std::fs::read(path).expect("reads back");
        let at = bytes.windows(5).position(|w| w == b"False").expect("a fortran_order");
        bytes[at..at + 5].copy_from_slice(b"True ");
        std::fs::write(path, bytes).expect("rewrites");
    }
}

#[test]
fn two_2d_files_make_one_product_written_to_a_2d_file() {
    let w = common::start(&[(None, 1.0), (None, 2.0)], None);
    let (n, k, m) = (45, 70, 38);
    let mut a = vec![0.0; n * k];
    let mut b = vec![0.0; k * m];
    dls_worker::kernel::fill_random(&mut a, 1);
    dls_worker::kernel::fill_random(&mut b, 2);
    let (pa, pb, pc) = (tmp("pa.npy"), tmp("pb.npy"), tmp("pc.npy"));
    write_f32(&pa, n, k, &a, false);
    write_f32(&pb, k, m, &b, true);
    let started = std::time::Instant::now();
    let (ok, out, err) = dls(
        &[
            "run",
            "--workers",
            &w.list(),
            "--input",
            s(&pa),
            s(&pb),
            "--output",
            s(&pc),
            "--json",
        ],
        None,
    );
    assert!(ok, "{err}");
    let command_secs = started.elapsed().as_secs_f64();
    let c = npy::read(&pc).expect("C");
    assert_eq!(
        (c.count, c.rows, c.cols, c.data.dtype()),
        (None, n, m, dls_protocol::DType::F32)
    );
    // The inputs as float32 saw them.
    let a32: Vec<f64> = a.iter().map(|&v| v as f32 as f64).collect();
    let b32: Vec<f64> = b.iter().map(|&v| v as f32 as f64).collect();
    for i in 0..n {
        for j in 0..m {
            let (mut want, mut scale) = (0.0, 0.0);
            for l in 0..k {
                want += a32[i * k + l] * b32[l * m + j];
                scale += (a32[i * k + l] * b32[l * m + j]).abs();
            }
            let got = c.data.get(i * m + j);
            let tol = (k as f64 + 2.0) * f32::EPSILON as f64 * scale;
            assert!((got - want).abs() <= tol, "C[{i}][{j}] = {got}, not {want}");
        }
    }
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["kind"], "product");
    assert!(v["measured_makespan"].as_f64().expect("a makespan") > 0.0);
    assert!(v["bound"]["makespan"].as_f64().expect("a bound") > 0.0);
    let ratio = v["communication"]["partition_over_lower"].as_f64().expect("a ratio");
    assert!(ratio >= 1.0 - 1e-9, "{ratio}");
    // Through the master's uplink: A and B at least once, C once.
    let uplink = v["communication"]["uplink"].as_u64().expect("values");
    let least = v["communication"]["uplink_least"].as_u64().expect("values");
    assert_eq!(least, (n * k + k * m + n * m) as u64);
    assert!(
        uplink >= least,
        "{uplink} values through the uplink, fewer than {least}"
    );
    // What the user waited for (no platform: calibrated first), in the
    // order it happened and inside the command's own time.
    let waited = |k: &str| {
        v["waited"][k]
            .as_f64()
            .unwrap_or_else(|| panic!("waited.{k}: {}", v["waited"]))
    };
    let makespan = v["measured_makespan"].as_f64().expect("a makespan");
    assert!(waited("calibration_secs") > 0.0);
    assert!(waited("first_send_secs") >= waited("connect_secs") + waited("calibration_secs") + waited("plan_secs"));
    assert!(waited("wall_secs") >= waited("calibration_secs") + makespan);
    assert!(waited("wall_secs") <= command_secs, "{} > {command_secs}", v["waited"]);
}

#[test]
fn a_random_product_reports_its_plan_and_writes_a_trace() {
    let w = common::start(&[(None, 1.0), (None, 1.0), (None, 3.0)], None);
    let trace = tmp("product-trace.json");
    let (ok, out, err) = dls(
        &[
            "run",
            "--workers",
            &w.list(),
            "--product",
            "--shape",
            "120,90,150",
            "--trace",
            s(&trace),
        ],
        None,
    );
    assert!(ok, "{err}");
    assert!(out.contains("makespan:") && out.contains("communication:"), "{out}");
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).expect("trace")).expect("JSON");
    let events = t["traceEvents"].as_array().expect("events");
    assert!(events
        .iter()
        .any(|e| e["cat"] == "send" && e["args"]["predicted"] == true));
    assert!(events
        .iter()
        .any(|e| e["cat"] == "return" && e["args"]["predicted"] == false));
    // Every event is the plan's, and each worker's sends, measured and
    // predicted, name the same pieces and panels in the same order (the
    // run follows the plan's port order; no worker was lost).
    let spans: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X" || e["ph"] == "i").collect();
    assert!(
        spans.iter().all(|e| e["args"]["phase"] == "plan"),
        "an event without its phase"
    );
    let sends = |predicted: bool| -> Vec<(u64, u64, u64)> {
        let mut v: Vec<(u64, u64, u64)> = (spans.iter())
            .filter(|e| e["cat"] == "send" && e["tid"] != 0 && e["args"]["predicted"] == predicted)
            .map(|e| {
                let a = &e["args"];
                (
                    e["tid"].as_u64().expect("tid"),
                    a["piece"].as_u64().expect("piece"),
                    a["panel"].as_u64().expect("panel"),
                )
            })
            .collect();
        v.sort();
        v
    };
    let (measured, predicted) = (sends(false), sends(true));
    assert!(!measured.is_empty());
    assert_eq!(measured, predicted);
}

#[test]
fn mistakes_are_named() {
    let w = common::start(&[(None, 1.0)], None);
    let (pa, pb) = (tmp("bad-a.npy"), tmp("bad-b.npy"));
    write_f32(&pa, 4, 5, &[0.5; 20], false);
    write_f32(&pb, 6, 3, &[0.5; 18], false);
    fails(
        &["run", "--workers", &w.list(), "--input", s(&pa), s(&pb)],
        None,
        "A's columns must be as many as B's rows",
    );
    fails(&["run", "--workers", &w.list(), "--product"], None, "give its shape");
    // A batch's files (rank 3) are not one product.
    let (ba, bb) = (tmp("batch-a.npy"), tmp("batch-b.npy"));
    npy::write(&ba, &common::cli::mats(2, 3, 4, vec![0.5; 24])).expect("writes");
    npy::write(&bb, &common::cli::mats(2, 4, 5, vec![0.5; 40])).expect("writes");
    fails(
        &["run", "--workers", &w.list(), "--product", "--input", s(&ba), s(&bb)],
        None,
        "must be 2-D",
    );
    fails(
        &[
            "run",
            "--workers",
            &w.list(),
            "--product",
            "--size",
            "8",
            "--batch",
            "3",
        ],
        None,
        "--batch",
    );
}
