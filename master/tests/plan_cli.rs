//! `dls plan` as a user runs it: JSON shape, and one clear line on bad input.

use std::io::Write;
use std::process::Command;

fn dls(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dls"))
        .args(args)
        .output()
        .expect("runs dls");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn platform_file(text: &str) -> tempfile_lite::TempFile {
    tempfile_lite::TempFile::new(text)
}

/// A temp file that removes itself, without a dependency.
mod tempfile_lite {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    pub struct TempFile(pub std::path::PathBuf);
    static N: AtomicUsize = AtomicUsize::new(0);
    impl TempFile {
        pub fn new(text: &str) -> Self {
            let path = std::env::temp_dir().join(format!(
                "dls-plan-test-{}-{}.toml",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            std::fs::File::create(&path)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .expect("temp file");
            TempFile(path)
        }
        pub fn path(&self) -> &str {
            self.0.to_str().expect("utf-8 temp path")
        }
    }
    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// `dls plan --platform PLATFORM --load 100 ARGS... --json`, parsed.
fn plan_json(platform: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["plan", "--platform", platform, "--load", "100"];
    all.extend_from_slice(args);
    all.push("--json");
    let (ok, out, err) = dls(&all);
    assert!(ok, "{all:?}: {err}");
    serde_json::from_str(&out).expect("JSON on stdout")
}

const TWO: &str =
    "[[worker]]\nname = \"a\"\nc = 0.01\nw = 0.1\nd = 0.005\n[[worker]]\nname = \"b\"\nc = 0.02\nw = 0.2\nd = 0.01\n";

#[test]
fn json_has_the_documented_shape() {
    let f = platform_file(TWO);
    for strategy in ["fifo", "lifo", "inc-c", "inc-w", "best"] {
        let v = plan_json(f.path(), &["--strategy", strategy]);
        assert_eq!(v["strategy"], strategy);
        assert_eq!(v["ports"], 1);
        assert_eq!(v["load"], 100);
        assert!(v["optimal"].is_boolean());
        let makespan = v["makespan"].as_f64().expect("makespan");
        let rational = v["makespan_rational"].as_f64().expect("makespan_rational");
        assert!(makespan >= rational * (1.0 - 1e-9));
        let throughput = v["throughput"].as_f64().expect("throughput");
        assert!((throughput * rational - 100.0).abs() < 1e-6);
        let workers = v["workers"].as_array().expect("workers");
        assert_eq!(workers.len(), 2);
        let total: u64 = workers.iter().map(|w| w["load"].as_u64().expect("load")).sum();
        assert_eq!(total, 100);
        for key in [
            "name",
            "alpha",
            "send_start",
            "send_end",
            "compute_end",
            "return_start",
            "return_end",
            "idle",
        ] {
            assert!(workers[0].get(key).is_some(), "missing {key}");
        }
        let enrolled = workers.iter().filter(|w| w["load"].as_u64() > Some(0)).count();
        assert_eq!(v["send_order"].as_array().expect("send_order").len(), enrolled);
        assert_eq!(v["return_order"].as_array().expect("return_order").len(), enrolled);
        // The last return ends at the makespan.
        let last_end = workers
            .iter()
            .map(|w| w["return_end"].as_f64().expect("f64"))
            .fold(0.0, f64::max);
        assert!((last_end - makespan).abs() < 1e-9);
    }
    assert_eq!(plan_json(f.path(), &["--ports", "2"])["ports"], 2);
}

#[test]
fn table_lists_every_worker() {
    let f = platform_file(TWO);
    let (ok, out, _) = dls(&["plan", "--platform", f.path(), "--load", "100"]);
    assert!(ok);
    assert!(
        out.contains("makespan")
            && out.lines().any(|l| l.starts_with("a "))
            && out.lines().any(|l| l.starts_with("b "))
    );
}

fn fails_with(args: &[&str], needle: &str) {
    let (ok, out, err) = dls(args);
    assert!(!ok, "should fail: {args:?}");
    assert!(out.is_empty(), "nothing on stdout on failure");
    assert!(err.contains(needle), "{err:?} should mention {needle:?}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_gets_one_clear_error() {
    let f = platform_file(TWO);
    fails_with(&["plan", "--platform", f.path(), "--load", "0"], "at least one unit");
    fails_with(
        &["plan", "--platform", "/nonexistent/p.toml", "--load", "5"],
        "/nonexistent/p.toml",
    );
    fails_with(&["plan", "--platform", f.path(), "--load", "-3"], "-3");
    fails_with(&["plan", "--platform", f.path(), "--load", "5", "--ports", "3"], "3");
    fails_with(
        &["plan", "--platform", f.path(), "--load", "5", "--strategy", "random"],
        "random",
    );
    let neg = platform_file("[[worker]]\nname = \"a\"\nc = -1\nw = 1\nd = 1\n");
    fails_with(&["plan", "--platform", neg.path(), "--load", "5"], "`c` = -1");
    let dup = platform_file(&format!("{TWO}[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\n"));
    fails_with(
        &["plan", "--platform", dup.path(), "--load", "5"],
        "used by another worker",
    );
    let broken = platform_file("[[worker]\nname=");
    fails_with(
        &["plan", "--platform", broken.path(), "--load", "5"],
        "not a valid platform file",
    );
    let bounded = platform_file("[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\nmax_load = 3\n");
    fails_with(
        &[
            "plan",
            "--platform",
            bounded.path(),
            "--load",
            "5",
            "--strategy",
            "fifo",
        ],
        "infeasible bounds",
    );
    // What one round cannot hold, best sends in rounds whose chunks fit.
    let (ok, out, err) = dls(&["plan", "--platform", bounded.path(), "--load", "5"]);
    assert!(ok, "{err}");
    assert!(out.contains("rounds can"), "{out}");
    let inf = platform_file("[[worker]]\nname = \"a\"\nc = inf\nw = 1\nd = 1\n");
    fails_with(&["plan", "--platform", inf.path(), "--load", "5"], "`c` = inf");
}

#[test]
fn partition_json_and_errors() {
    let f = platform_file(
        "[[processor]]\nname = \"a\"\nspeed = 1.0\n[[processor]]\nname = \"b\"\nspeed = 3.0\n[[processor]]\nname = \"c\"\npoints = [[10, 2.0], [100, 2.0]]\nmax_elements = 5\n",
    );
    let (ok, out, err) = dls(&["partition", "--speeds", f.path(), "--elements", "40", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let alloc = v["allocation"].as_array().expect("allocation");
    let got: Vec<(String, u64)> = alloc
        .iter()
        .map(|a| {
            (
                a["name"].as_str().expect("name").to_string(),
                a["elements"].as_u64().expect("elements"),
            )
        })
        .collect();
    // c is held to its bound of 5; a and b share the other 35 as 1 : 3
    // (8.75 and 26.25): every best whole split has a largest time of 9 s.
    assert_eq!(got.iter().map(|g| g.1).sum::<u64>(), 40);
    assert_eq!(got[2], ("c".to_string(), 5));
    assert!((v["time"].as_f64().expect("time") - 9.0).abs() < 1e-9, "{v}");
    let consts = platform_file("[[processor]]\nname = \"a\"\nspeed = 1.0\n[[processor]]\nname = \"b\"\nspeed = 4.0\n");
    let (ok, out, _) = dls(&[
        "partition",
        "--speeds",
        consts.path(),
        "--elements",
        "300",
        "--cost",
        "n2",
        "--json",
    ]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    // n² cost: shares ∝ √k = 1 : 2.
    assert_eq!(v["allocation"][0]["elements"], 100);
    assert_eq!(v["allocation"][1]["elements"], 200);
    fails_with(
        &["partition", "--speeds", f.path(), "--elements", "40", "--cost", "n2"],
        "has speed points",
    );
    fails_with(
        &["partition", "--speeds", f.path(), "--elements", "40", "--cost", "cubic"],
        "unknown --cost",
    );
    fails_with(&["partition", "--speeds", f.path(), "--elements", "0"], "at least 1");
    let both = platform_file("[[processor]]\nname = \"a\"\nspeed = 1.0\npoints = [[1, 1.0]]\n");
    fails_with(
        &["partition", "--speeds", both.path(), "--elements", "4"],
        "exactly one of",
    );
    let tight = platform_file("[[processor]]\nname = \"a\"\nspeed = 1.0\nmax_elements = 2\n");
    fails_with(
        &["partition", "--speeds", tight.path(), "--elements", "4"],
        "infeasible bounds",
    );
}

#[test]
fn plan_reports_the_steady_state_bound() {
    // By hand: the port binds. Workers by increasing c + d: "a" (0.2 s per
    // unit on the port) takes min(1/w, 1/0.2) = 5 units/s and fills the
    // port, so ρ* = 5 and 100 units need at least 20 s; "b" adds nothing.
    // Two ports: a sends at 10/s and returns at 10/s but computes only 10/s
    // (w = 0.1): 10 units/s from a, the send port full: ρ* = 10, 10 s.
    let f = platform_file(
        "[[worker]]\nname = \"a\"\nc = 0.1\nw = 0.1\nd = 0.1\n\n[[worker]]\nname = \"b\"\nc = 0.2\nw = 0.1\nd = 0.2\n",
    );
    for (ports, want) in [("1", 20.0), ("2", 10.0)] {
        let v = plan_json(f.path(), &["--ports", ports]);
        let bound = v["bound"].as_f64().expect("bound");
        assert!((bound - want).abs() < 1e-9, "ports {ports}: bound {bound}, want {want}");
        let makespan = v["makespan"].as_f64().expect("makespan");
        // `best` may reach the bound (rounds), within rounding.
        assert!(
            makespan >= bound * (1.0 - 1e-12),
            "ports {ports}: {makespan} under the bound {bound}"
        );
        assert!((v["makespan_over_bound"].as_f64().expect("ratio") - makespan / bound).abs() < 1e-12);
    }
    let (ok, out, _) = dls(&["plan", "--platform", f.path(), "--load", "100"]);
    assert!(ok && out.contains("steady-state bound 20.000000 s"), "{out}");
}

/// `--size`/`--shape` plan for other products than the file's: rescaled by
/// its model (a single worker, so the makespan is c + w + d per unit, from
/// closed forms), refused without one.
#[test]
fn other_products_are_planned_through_the_files_model_or_refused() {
    let model = "size = 64\n[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\n\
                 send_per_byte = 1e-9\nreturn_per_byte = 1e-9\nspeed = [[64.0, 1e9], [256.0, 4e9]]\n";
    let f = platform_file(model);
    let (ok, out, err) = dls(&["plan", "--platform", f.path(), "--load", "1", "--size", "128", "--json"]);
    assert!(ok && err.contains("rescaled to 128×128 float64"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    // 128: A and B 262144 bytes out, C 131072 back at 1 ns; 2·128³ flops at
    // 2.5e9 flop/s (halfway from 1e9 to 4e9 in log size).
    let want = 262144e-9 + 2.0 * 128f64.powi(3) / 2.5e9 + 131072e-9;
    let got = v["makespan"].as_f64().expect("makespan");
    assert!((got - want).abs() < 1e-9 * want.max(1.0), "{got} vs {want}");
    let plain = platform_file("size = 64\n[[worker]]\nname = \"a\"\nc = 1\nw = 1\nd = 1\n");
    let (ok, _, err) = dls(&["plan", "--platform", plain.path(), "--load", "1", "--shape", "8,4,2"]);
    assert!(
        !ok && err.contains("no model") && err.contains("dls calibrate --shape 8,4,2"),
        "{err}"
    );
    // The file's own products plan as they are.
    let (ok, _, err) = dls(&["plan", "--platform", plain.path(), "--load", "1", "--size", "64"]);
    assert!(ok, "{err}");
}
