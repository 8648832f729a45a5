//! The Slurm batch script (`configs/slurm-batch.sh`) end to end, with
//! stand-in `scontrol` and `srun` on PATH: the "nodes" are loopback
//! addresses (127.0.0.2, 127.0.0.3), and srun starts one real dls-worker on
//! each (with 0.0.0.0 replaced by the node's own address, as each real node
//! has its own).

mod common;
use common::token_file;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const SCONTROL: &str = r#"#!/usr/bin/env bash
# Stand-in: `scontrol show hostnames LIST` for a comma-separated LIST.
[ "$1 $2" = "show hostnames" ] || { echo "stand-in scontrol: only 'show hostnames'" >&2; exit 2; }
tr ',' '\n' <<<"$3"
"#;

const SRUN: &str = r#"#!/usr/bin/env bash
# Stand-in: run the command once per node of the job, in the background,
# with 0.0.0.0 replaced by the node's address; stop them all on TERM.
while [[ "$1" == --* ]]; do shift; done
pids=()
for node in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do
  args=()
  for a in "$@"; do args+=("${a//0.0.0.0/$node}"); done
  "${args[@]}" >"$SRUN_LOG_DIR/$node.out" 2>"$SRUN_LOG_DIR/$node.err" &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null; wait; exit 0' TERM INT
wait
"#;

fn write_exe(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("writes");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A directory with the stand-ins and `dls`, `dls-worker` linked in.
fn bin_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dls-slurm-bin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bin dir");
    write_exe(&dir.join("scontrol"), SCONTROL);
    write_exe(&dir.join("srun"), SRUN);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_dls-under-test"), dir.join("dls")).expect("links dls");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_dls-worker-under-test"), dir.join("dls-worker"))
        .expect("links dls-worker");
    dir
}

/// A port free on 127.0.0.2 and 127.0.0.3 just now.
fn free_port() -> u16 {
    loop {
        let l = std::net::TcpListener::bind("127.0.0.2:0").expect("binds");
        let port = l.local_addr().expect("addr").port();
        if std::net::TcpListener::bind(("127.0.0.3", port)).is_ok() {
            return port;
        }
    }
}

#[test]
fn the_slurm_batch_script_runs_a_batch_on_the_allocation_and_stops_its_workers() {
    let bin = bin_dir();
    let tok = token_file("slurm");
    let port = free_port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/slurm-batch.sh");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut child = Command::new("bash")
        .arg(&script)
        .args(["--batch", "12", "--size", "16", "--verify", "12", "--json"])
        .env("PATH", path)
        .env("SLURM_JOB_NODELIST", "127.0.0.2,127.0.0.3")
        .env("DLS_WORKER_PORT", port.to_string())
        .env("DLS_TOKEN_FILE", &tok)
        .env("DLS_WAIT", "20")
        .env("SRUN_LOG_DIR", &bin)
        .env_remove("DLS_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs the script");
    // Bounded: the batch takes about a second.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while child.try_wait().expect("waits").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the batch script did not finish in 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("output");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // `dls status` printed its table, then `dls run` its JSON report.
    assert!(stdout.contains("127.0.0.2") && stdout.contains("free"), "{stdout}");
    let json = &stdout[stdout.find('{').expect("a JSON report")..];
    let report: serde_json::Value = serde_json::from_str(json).expect("the report parses");
    assert_eq!(report["verified"], 12, "{json}");
    let names: Vec<&str> = report["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .filter_map(|w| w["name"].as_str())
        .collect();
    assert_eq!(names, ["127.0.0.2", "127.0.0.3"], "workers are named by host");
    // The workers were stopped with the job.
    std::thread::sleep(Duration::from_millis(300));
    for host in ["127.0.0.2", "127.0.0.3"] {
        assert!(
            std::net::TcpStream::connect((host, port)).is_err(),
            "the worker on {host} is still listening"
        );
    }
    let _ = std::fs::remove_dir_all(bin);
}
