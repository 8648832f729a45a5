//! Lose a worker, lose no product: real worker processes killed (kill -9)
//! while receiving, computing and returning, and one stopped (SIGSTOP)
//! forever, under a running master. Every run must finish with every
//! product correct. Kills are triggered by the victim's own log lines, so
//! each lands in the phase it is meant for; the test then checks from the
//! measurements that it did.

use dls_lp::{Platform, Worker};
use dls_master::cluster::Cluster;
use dls_master::link::{self, Timeouts};
use dls_master::report::RunReport;
use dls_master::run::{Batch, RunOptions};
use dls_master::session::{self, RunConfig};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

struct Proc {
    child: Child,
    addr: String,
    /// Lines the daemon logs (stderr), as they come.
    log: mpsc::Receiver<String>,
}

impl Proc {
    fn start(extra: &[&str]) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dls-worker-under-test"))
            .args(["--listen", "127.0.0.1:0", "--threads", "1"])
            .args(extra)
            .env_remove("DLS_TOKEN")
            .env("RUST_LOG", "dls_worker=debug")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts the worker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("reads the listening line");
        let addr = line.trim().rsplit(' ').next().expect("address").to_string();
        let (tx, log) = mpsc::channel();
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Proc { child, addr, log }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill {sig} failed");
    }

    /// Block until the daemon logs a line containing `needle` (at most 60 s).
    fn wait_for(log: &mpsc::Receiver<String>, needle: &str) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
            match log.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.signal_quiet("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    fn signal_quiet(&self, sig: &str) -> std::io::Result<std::process::ExitStatus> {
        Command::new("kill").args([sig, &self.child.id().to_string()]).status()
    }
}

#[derive(Clone, Copy, Debug)]
enum Blow {
    /// kill -9 once this log line appears.
    Kill(&'static str),
    /// SIGSTOP once this log line appears (the worker hangs forever).
    Stop(&'static str),
}

const N: usize = 64;
const M: usize = 60;

/// Three workers; the victim (w0) has a slow link and a slow processor, so
/// each of its phases lasts long enough to be hit. The plan is told all
/// three are equal, so w0 is first in FIFO order and gets a third of the
/// batch.
fn run_with_victim(blow: Blow, max_chunk_bytes: u64) -> (RunReport, Vec<f64>, Batch) {
    let victim = Proc::start(&["--link-rate", "1", "--slowdown", "3000"]);
    let others = [Proc::start(&[]), Proc::start(&[])];
    let list = format!("{},{},{}", victim.addr, others[0].addr, others[1].addr);
    let platform = Platform::new(
        (0..3)
            .map(|i| Worker::new(format!("w{i}"), 0.01, 0.01, 0.005))
            .collect(),
    )
    .expect("platform");
    let batch = Batch::random(M, N, 9);
    let (needle, sig) = match blow {
        Blow::Kill(n) => (n, "-KILL"),
        Blow::Stop(n) => (n, "-STOP"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let cfg = RunConfig {
        verify: 5,
        options: RunOptions {
            max_chunk_bytes,
            ..RunOptions::default()
        },
        ..RunConfig::default()
    };
    let b = batch.clone();
    let (report, c) = std::thread::scope(|s| {
        let killer = s.spawn(move || {
            let hit = Proc::wait_for(&victim.log, needle);
            if hit {
                victim.signal(sig);
            }
            (hit, victim)
        });
        let out = rt.block_on(async {
            let cluster = Cluster::from_list(&list).expect("cluster");
            let links = link::connect_all(&cluster, None, Timeouts::default())
                .await
                .expect("connects");
            let (_links, done) = tokio::time::timeout(
                Duration::from_secs(120),
                session::run_batch(links, &platform, &b, &cfg, 1, |_| {}),
            )
            .await
            .expect("the run ends by itself");
            done.map(|d| (d.report, d.outcome.c))
        });
        let (hit, victim) = killer.join().expect("killer thread");
        assert!(hit, "the victim never logged {needle:?}");
        drop(victim);
        out.unwrap_or_else(|e| panic!("{blow:?}: the run failed: {e:#}"))
    });
    (report, c, batch)
}

fn check_complete(report: &RunReport, c: &[f64], batch: &Batch) {
    let nn = N * N;
    for i in 0..M {
        let want = dls_worker::kernel::naive(&batch.a[i * nn..(i + 1) * nn], &batch.b[i * nn..(i + 1) * nn], N);
        for (x, y) in c[i * nn..(i + 1) * nn].iter().zip(&want) {
            assert!((x - y).abs() <= 1e-12 * N as f64, "product {i}: {x} vs {y}");
        }
    }
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert_eq!(report.failures[0].worker, "w0");
    assert!(report.failures[0].products_lost > 0);
    assert!(!report.replans.is_empty(), "the lost products were planned again");
    assert!(report.replans.iter().all(|r| !r.workers.contains(&"w0".to_string())));
    assert_eq!(report.verified, 5);
}

#[test]
fn killed_while_receiving() {
    // Chunks of 16 products: the first chunk's arrival is logged while the
    // rest of w0's load is still on its way.
    let (r, c, b) = run_with_victim(Blow::Kill("received"), 16 * 2 * (N * N * 8) as u64);
    check_complete(&r, &c, &b);
    assert_eq!(
        r.failures[0].products_lost as u64, r.workers[0].load,
        "nothing of w0 came back"
    );
    assert_eq!(
        r.workers[0].measured.compute_end, 0.0,
        "w0 died before computing all it was sent"
    );
}

#[test]
fn killed_while_computing() {
    let (r, c, b) = run_with_victim(Blow::Kill("computing"), 256 << 20);
    check_complete(&r, &c, &b);
    let m = r.workers[0].measured;
    assert!(m.send_end > 0.0, "w0 had received its chunk");
    assert_eq!(m.compute_end, 0.0, "w0 died before it was done computing");
}

#[test]
fn killed_while_returning() {
    let (r, c, b) = run_with_victim(Blow::Kill("sending results"), 256 << 20);
    check_complete(&r, &c, &b);
    let m = r.workers[0].measured;
    assert!(
        m.compute_end > 0.0 && m.return_start > 0.0,
        "w0 had been granted the port"
    );
    assert_eq!(m.return_end, 0.0, "w0 died before its results were in");
}

#[test]
fn stalled_forever_is_detected() {
    let (r, c, b) = run_with_victim(Blow::Stop("computing"), 256 << 20);
    check_complete(&r, &c, &b);
    assert!(
        r.failures[0].reason.contains("no sign of life"),
        "{}",
        r.failures[0].reason
    );
}
