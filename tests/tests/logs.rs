//! The master's log: a real `dls run` with `--log-format json`, a worker
//! killed while it computes. The JSON lines must parse and tell what an
//! operator needs: the connections, the plan, the loss and what was
//! redone, and the end worker by worker; `dls calibrate` logs its fits.

mod common;
use common::Proc;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The JSON events on `stderr` (lines that are not JSON are the human
/// remarks, kept apart); a line that starts like JSON must be JSON.
fn events(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The events whose message is `message`.
fn named<'a>(events: &'a [Value], message: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["fields"]["message"] == message).collect()
}

#[test]
fn a_run_with_a_worker_killed_logs_its_decisions_as_json() {
    let victim = Proc::start(&["--link-rate", "1", "--slowdown", "3000"]);
    let others = [Proc::start(&[]), Proc::start(&[])];
    let addrs = [victim.addr.clone(), others[0].addr.clone(), others[1].addr.clone()];
    // Told all three are equal, the plan gives the slow victim its share.
    let dir = std::env::temp_dir().join(format!("dls-logs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let platform = dir.join("platform.toml");
    let mut text = String::from("size = 64\n");
    for a in &addrs {
        text.push_str(&format!("[[worker]]\nname = \"{a}\"\nc = 0.01\nw = 0.01\nd = 0.005\n"));
    }
    std::fs::write(&platform, text).expect("writes the platform");
    let mut child = Command::new(env!("CARGO_BIN_EXE_dls-under-test"))
        .args(["run", "--workers", &addrs.join(","), "--platform"])
        .arg(&platform)
        .args([
            "--batch",
            "60",
            "--size",
            "64",
            "--strategy",
            "fifo",
            "--log-format",
            "json",
        ])
        .env("RUST_LOG", "dls_master=debug")
        .env_remove("DLS_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts dls");
    let err = child.stderr.take().expect("stderr");
    let lines = std::thread::spawn(move || BufReader::new(err).lines().map_while(Result::ok).collect::<Vec<_>>());
    assert!(Proc::wait_for(&victim.log, "computing"), "the victim never computed");
    victim.signal("-KILL");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().expect("waits") {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "dls run did not end");
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = lines.join().expect("reader").join("\n");
    assert!(status.success(), "{stderr}");
    let ev = events(&stderr);

    let connected = named(&ev, "connected");
    assert_eq!(connected.len(), 3, "{stderr}");
    assert!(connected.iter().all(|e| e["level"] == "DEBUG"));
    let plan = named(&ev, "plan");
    assert_eq!(plan.len(), 1, "{stderr}");
    let first = &plan[0]["fields"];
    assert_eq!(first["strategy"], "fifo");
    assert_eq!(first["load"], 60);
    assert!(
        first["enrolled"].as_str().expect("enrolled").contains(&victim.addr),
        "{first}"
    );
    assert!(first["predicted"].as_f64().expect("predicted") >= first["bound"].as_f64().expect("bound") * (1.0 - 1e-9));

    let lost = named(&ev, "worker lost; its products are redone elsewhere");
    assert_eq!(lost.len(), 1, "{stderr}");
    assert_eq!(lost[0]["level"], "WARN");
    assert_eq!(lost[0]["fields"]["worker"], victim.addr.as_str());
    let products_lost = lost[0]["fields"]["products_lost"].as_u64().expect("products_lost");
    assert!(products_lost > 0);
    let recovery = named(&ev, "recovery round");
    assert_eq!(recovery.len(), 1, "{stderr}");
    assert_eq!(recovery[0]["fields"]["products"].as_u64(), Some(products_lost));
    assert!(!recovery[0]["fields"]["workers"]
        .as_str()
        .expect("workers")
        .contains(&victim.addr));

    // The end: each worker that took part (the victim marked lost), then
    // the whole.
    let done = named(&ev, "worker done");
    let victim_end = done
        .iter()
        .find(|e| e["fields"]["worker"] == victim.addr.as_str())
        .expect("the victim's end");
    assert_eq!(victim_end["fields"]["lost"], true);
    assert!(done.iter().all(|e| e["level"] == "INFO"));
    let run_done = named(&ev, "run done");
    assert_eq!(run_done.len(), 1, "{stderr}");
    assert_eq!(run_done[0]["fields"]["failures"], 1);
    assert_eq!(run_done[0]["fields"]["recovery_rounds"], 1);
    drop(others);
}

#[test]
fn calibration_logs_each_workers_fits() {
    let workers = [Proc::start(&[]), Proc::start(&[])];
    let list = format!("{},{}", workers[0].addr, workers[1].addr);
    let out = std::env::temp_dir().join(format!("dls-logs-cal-{}.toml", std::process::id()));
    let done = Command::new(env!("CARGO_BIN_EXE_dls-under-test"))
        .args([
            "calibrate",
            "--workers",
            &list,
            "--size",
            "16",
            "--log-format",
            "json",
            "-o",
        ])
        .arg(&out)
        .env("RUST_LOG", "info")
        .env_remove("DLS_TOKEN")
        .output()
        .expect("runs dls calibrate");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{stderr}");
    let ev = events(&stderr);
    let cal = named(&ev, "calibrated");
    let names: Vec<&str> = cal.iter().filter_map(|e| e["fields"]["worker"].as_str()).collect();
    assert_eq!(names, [workers[0].addr.as_str(), workers[1].addr.as_str()], "{stderr}");
    for e in cal {
        let f = &e["fields"];
        for key in ["c", "w", "d", "send_r2", "compute_r2", "return_r2"] {
            assert!(f[key].is_number(), "{key} in {f}");
        }
    }
    let _ = std::fs::remove_file(out);
}
