//! Operating a cluster from the command line: workers that are down,
//! masters that stop, `dls status`, Slurm and cluster files, against worker
//! daemons on 127.0.0.1.

mod common;
use common::cli::{dls, s, tmp};
use std::process::Command;

/// An address where nothing listens (a port just freed).
fn dead_address() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    l.local_addr().expect("addr").to_string()
}

#[test]
fn a_worker_that_is_down_is_left_out_unless_all_are_required() {
    let w = common::start(&[(None, 1.0), (None, 1.0)], None);
    let dead = dead_address();
    let list = format!("{},{dead}", w.list());
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--workers",
            &list,
            "--batch",
            "12",
            "--size",
            "8",
            "--verify",
            "12",
            "--json",
        ];
        args.extend_from_slice(extra);
        dls(&args, None)
    };
    let (ok, out, err) = run(&[]);
    assert!(ok, "{err}");
    assert!(
        err.contains(&format!("warning: worker {dead} left out")) && err.contains("cannot connect"),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    // Workers given by --workers are named by their address.
    assert_eq!(report["left_out"][0]["worker"], dead.as_str(), "{out}");
    assert_eq!(report["verified"], 12);
    assert_eq!(report["workers"].as_array().map(Vec::len), Some(2));
    // With a platform file naming all three (by address), the batch runs on
    // the two.
    let platform = tmp("three.toml");
    let entries: String = list
        .split(',')
        .map(|a| format!("[[worker]]\nname = \"{a}\"\nc = 0.001\nw = 0.001\nd = 0.001\n"))
        .collect();
    std::fs::write(&platform, entries).expect("writes");
    let (ok, _, err) = run(&["--platform", s(&platform)]);
    assert!(ok, "{err}");
    let (ok, _, err) = run(&["--require-all"]);
    assert!(!ok, "--require-all ran without the dead worker");
    assert!(err.contains(&dead) && err.contains("cannot connect"), "{err}");
    // Calibration the same way.
    let out = tmp("two.toml");
    let (ok, _, err) = dls(&["calibrate", "--workers", &list, "--size", "8", "-o", s(&out)], None);
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&out).expect("platform written");
    assert!(text.contains(&w.addrs[1]) && !text.contains(&dead), "{text}");
    let (ok, _, err) = dls(
        &[
            "calibrate",
            "--workers",
            &list,
            "--size",
            "8",
            "-o",
            s(&out),
            "--require-all",
        ],
        None,
    );
    assert!(!ok && err.contains(&dead), "{err}");
}

#[test]
fn a_stopped_master_lets_the_next_one_in_after_the_idle_timeout() {
    let w = common::start_with(&[(Some(5.0), 1.0)], None, 1 << 30, std::time::Duration::from_secs(2));
    let list = w.list();
    // A batch that takes seconds over a 5 MB/s link, stopped (SIGSTOP) in
    // the middle.
    let mut first = Command::new(env!("CARGO_BIN_EXE_dls"))
        .args([
            "run",
            "--workers",
            &list,
            "--batch",
            "40",
            "--size",
            "128",
            "--verify",
            "0",
        ])
        .env_remove("DLS_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts dls run");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pid = first.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .expect("kill")
        .success());
    let t = std::time::Instant::now();
    let mut busy_seen = false;
    let outcome = loop {
        let (ok, _, err) = dls(&["run", "--workers", &list, "--batch", "2", "--size", "8"], None);
        if ok {
            break Ok(t.elapsed());
        }
        busy_seen |= err.contains("busy");
        if t.elapsed() > std::time::Duration::from_secs(15) {
            break Err(err);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let _ = first.kill();
    let _ = first.wait();
    let waited = outcome.unwrap_or_else(|err| panic!("still refused 15 s after the stop: {err}"));
    assert!(busy_seen, "the stopped master held the worker for a while");
    assert!(waited < std::time::Duration::from_secs(10), "waited {waited:?}");
}

#[test]
fn status_lists_every_worker_free_busy_or_unreachable() {
    let token = "status-token-0123456789";
    let w = common::start(&[(None, 1.0), (None, 1.0)], Some(token));
    let dead = dead_address();
    let list = format!("{},{dead}", w.list());
    // Worker w0 busy with a master that holds it.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let cluster = dls_master::config::cluster::Cluster::from_list(&w.addrs[0]).expect("cluster");
    let tok = dls_protocol::Token::parse(token);
    let mut pool = rt
        .block_on(dls_master::session::Pool::connect(
            &cluster,
            tok.as_ref(),
            dls_master::session::ConnectOptions::default(),
        ))
        .expect("a master holds w0");
    let (ok, out, err) = dls(&["status", "--workers", &list, "--json"], Some(token));
    assert!(!ok, "w2 is down, so status fails");
    assert!(err.contains("1 of 3 worker(s) did not answer"), "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(rows[0]["status"]["busy"], true, "{out}");
    assert!(
        rows[0]["status"]["busy_with"]
            .as_str()
            .is_some_and(|m| m.starts_with("127.0.0.1:")),
        "{out}"
    );
    assert_eq!(rows[1]["status"]["busy"], false, "{out}");
    assert!(rows[1]["status"]["cores"].as_u64().is_some_and(|c| c >= 1), "{out}");
    assert_eq!(rows[1]["status"]["threads"], 1);
    assert_eq!(rows[2]["reachable"], false);
    assert!(
        rows[2]["error"].as_str().is_some_and(|e| e.contains("cannot connect")),
        "{out}"
    );
    rt.block_on(pool.close());
    // All up: the table, exit 0; a wrong token is "unreachable" with why.
    let (ok, out, err) = dls(&["status", "--workers", &w.list()], Some(token));
    assert!(ok, "{err}");
    assert_eq!(out.matches("free").count(), 2, "{out}");
    let (ok, out, _) = dls(&["status", "--workers", &w.list()], Some("wrong-token-0123456789"));
    assert!(!ok && out.contains("different tokens"), "{out}");
    // --wait waits for the missing one, then gives up.
    let t = std::time::Instant::now();
    let (ok, _, _) = dls(&["status", "--workers", &dead, "--wait", "1"], None);
    assert!(!ok && t.elapsed() >= std::time::Duration::from_secs(1));
}

#[test]
fn slurm_outside_an_allocation_says_so() {
    let out = Command::new(env!("CARGO_BIN_EXE_dls"))
        .args(["status", "--slurm"])
        .env_remove("SLURM_JOB_NODELIST")
        .output()
        .expect("runs dls");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("SLURM_JOB_NODELIST is not set"),
        "{err}"
    );
    // --worker-port only means something with --slurm.
    let (ok, _, err) = dls(&["status", "--workers", "127.0.0.1:1", "--worker-port", "7071"], None);
    assert!(!ok && err.contains("--slurm"), "{err}");
}

#[test]
fn a_cluster_file_carries_the_token_file_and_the_port() {
    use std::os::unix::fs::PermissionsExt;
    let token = "cluster-default-token-0123456789";
    let w = common::start(&[(None, 1.0)], Some(token));
    let dir = std::env::temp_dir().join(format!("dls-cluster-defaults-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("secret"), token).expect("writes the token");
    std::fs::set_permissions(dir.join("secret"), std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (host, port) = w.addrs[0].rsplit_once(':').expect("host:port");
    let file = dir.join("cluster.toml");
    std::fs::write(
        &file,
        format!("token_file = \"secret\"\nworker_port = {port}\n[[worker]]\nname = \"only\"\naddress = \"{host}\"\n"),
    )
    .expect("writes the cluster file");
    // No --token-file, no DLS_TOKEN: the file's own token, found beside it.
    let (ok, out, err) = dls(&["status", "--cluster", s(&file)], None);
    assert!(ok, "{err}");
    assert!(out.contains("only") && out.contains("free"), "{out}");
    let _ = std::fs::remove_dir_all(dir);
}
