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
fn bin_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dls-slurm-bin-{tag}-{}", std::process::id()));
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

/// The batch script as a job on nodes 127.0.0.2 and 127.0.0.3, with
/// `args` for `dls run`, in a process group of its own (as a job is).
fn job(bin: &Path, tok: &Path, port: u16, args: &[&str], worker_args: &str) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/slurm-batch.sh");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    Command::new("bash")
        .arg(&script)
        .args(args)
        .env("PATH", path)
        .env("SLURM_JOB_NODELIST", "127.0.0.2,127.0.0.3")
        .env("DLS_WORKER_PORT", port.to_string())
        .env("DLS_TOKEN_FILE", tok)
        .env("DLS_WAIT", "20")
        .env("DLS_WORKER_ARGS", worker_args)
        .env("SRUN_LOG_DIR", bin)
        .env_remove("DLS_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("runs the script")
}

#[test]
fn the_slurm_batch_script_runs_a_batch_on_the_allocation_and_stops_its_workers() {
    let bin = bin_dir("run");
    let tok = token_file("slurm");
    let port = free_port();
    let mut child = job(
        &bin,
        &tok,
        port,
        &["--batch", "12", "--size", "16", "--verify", "12", "--json"],
        "",
    );
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

/// A job that runs out of time gets SIGTERM (every process of it); the
/// same submission again finishes C from where it stopped.
#[test]
fn a_job_out_of_time_is_finished_by_submitting_it_again() {
    use dls_master::output::journal::Journal;
    let bin = bin_dir("resume");
    let tok = token_file("slurm-resume");
    let port = free_port();
    let out = bin.join("c.npy");
    let journal = bin.join(".c.npy.dls-journal");
    let o = out.to_str().expect("utf-8");
    // Costs that make `rounds` return results all along the run (measured
    // ones may make one round best, and then nothing is in until the end).
    let platform = bin.join("platform.toml");
    let mut text = String::new();
    for host in ["127.0.0.2", "127.0.0.3"] {
        text.push_str(&format!(
            "[[worker]]\nname = \"{host}\"\nc = 0.001\nw = 0.02\nd = 0.0005\n"
        ));
    }
    std::fs::write(&platform, text).expect("platform");
    let p = platform.to_str().expect("utf-8");
    let args = [
        "--batch",
        "200",
        "--size",
        "32",
        "--seed",
        "7",
        "--strategy",
        "rounds",
        "--platform",
        p,
        "--output",
        o,
        "--json",
    ];
    let done = |j: &Path| Journal::read(j).ok().flatten().map_or(0, |f| f.products_done());
    // The journal is made durable every 0.5 s: the job must outlast a
    // sync. At 3,000 times the kernel's time a processor with AVX-512 ran
    // these 200 products of 32² before the first one; at 30,000, about 15
    // ms a product there.
    let mut first = job(&bin, &tok, port, &args, "--slowdown 30000");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while done(&journal) < 10 {
        if first.try_wait().expect("waits").is_some() {
            let out = first.wait_with_output().expect("output");
            panic!(
                "the job ended before its time limit: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(std::time::Instant::now() < deadline, "no results within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The time limit: SIGTERM to the whole job.
    let pgid = format!("-{}", first.id());
    assert!(Command::new("kill")
        .args(["-TERM", "--", &pgid])
        .status()
        .expect("kill")
        .success());
    let first = first.wait_with_output().expect("ends");
    assert!(!first.status.success(), "a job stopped short fails");
    let held = done(&journal);
    assert!(held >= 10);
    std::thread::sleep(Duration::from_millis(300));
    let second = job(&bin, &tok, port, &args, "").wait_with_output().expect("runs");
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    let report: serde_json::Value = serde_json::from_str(&stdout[stdout.find('{').expect("JSON")..]).expect("parses");
    let resumed = report["resumed"].as_u64().expect("resumed") as usize;
    assert!(resumed >= held, "resumed {resumed}, the journal held {held}");
    assert_eq!(resumed + report["load"].as_u64().expect("load") as usize, 200);
    let batch = dls_master::session::Batch::random(200, 32, 7);
    let c = dls_master::output::npy::read(&out).expect("C");
    let c = c.data.to_f64(0..200 * 32 * 32);
    for i in 0..200 {
        let want = dls_worker::kernel::naive(&batch.a_of(i).expect("A"), &batch.b_of(i).expect("B"), 32);
        // Random values: the kernel sums in another order than the naive one.
        let got = &c[i * 1024..(i + 1) * 1024];
        assert!(
            got.iter().zip(&want).all(|(x, y)| (x - y).abs() <= 1e-12 * 32.0),
            "product {i} differs"
        );
    }
    let _ = std::fs::remove_dir_all(bin);
}
