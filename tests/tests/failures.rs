//! Lose a worker, lose no product: real worker processes killed (kill -9)
//! while receiving, computing and returning, and one stopped (SIGSTOP)
//! forever, under a running master. Every run must finish with every
//! product correct. Kills are triggered by the victim's own log lines, so
//! each lands in the phase it is meant for; the test then checks from the
//! measurements that it did.

use dls_lp::{Platform, Worker};
use dls_master::config::cluster::Cluster;
use dls_master::output::report::RunReport;
use dls_master::session::Batch;
use dls_master::session::ConnectOptions;
use dls_master::session::Pool;
use dls_master::session::RunOptions;
use dls_master::session::{self, RunConfig};
mod common;
use common::Proc;
use std::time::Duration;

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
    let platform = common::equal_platform(3, 0.01, 0.01, 0.005);
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
            let mut pool = common::pool_of(&list, None, ConnectOptions::default()).await;
            let done = tokio::time::timeout(
                Duration::from_secs(120),
                session::run_batch(&mut pool, &platform, &b, &cfg, 1, |_| {}),
            )
            .await
            .expect("the run ends by itself");
            done.map(|d| (d.report, d.outcome.c.to_f64(0..d.outcome.c.len()).into_owned()))
        });
        let (hit, victim) = killer.join().expect("killer thread");
        assert!(hit, "the victim never logged {needle:?}");
        drop(victim);
        out.unwrap_or_else(|e| panic!("{blow:?}: the run failed: {e:#}"))
    });
    (report, c, batch)
}

/// Every product of `c` against the naive product of `batch`.
fn assert_all_right(c: &[f64], batch: &Batch) {
    let nn = N * N;
    for i in 0..M {
        let want = dls_worker::kernel::naive(&batch.a_of(i).expect("A"), &batch.b_of(i).expect("B"), N);
        for (x, y) in c[i * nn..(i + 1) * nn].iter().zip(&want) {
            assert!((x - y).abs() <= 1e-12 * N as f64, "product {i}: {x} vs {y}");
        }
    }
}

fn check_complete(report: &RunReport, c: &[f64], batch: &Batch) {
    assert_all_right(c, batch);
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert_eq!(report.failures[0].worker, "w0");
    assert!(report.failures[0].products_lost > 0);
    assert!(!report.replans.is_empty(), "the lost products were planned again");
    assert!(report.replans.iter().all(|r| !r.workers.contains(&"w0".to_string())));
    // The summary says so, and shows no negative time for the phases the
    // lost worker never finished.
    let table = report.table();
    assert!(
        table.contains("w0 (lost)") && table.contains("lost w0 at") && table.contains("recovery round 1"),
        "{table}"
    );
    let negative = table
        .split(|c: char| c.is_whitespace() || c == '/' || c == '(' || c == ')' || c == ';' || c == ',')
        .filter_map(|t| t.parse::<f64>().ok())
        .find(|v| *v < 0.0);
    assert_eq!(negative, None, "{table}");
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
    // Seen as silence, or as a send the stopped worker no longer takes
    // (the master keeps little unsent in the kernel, so its write waits).
    let why = &r.failures[0].reason;
    assert!(
        why.contains("no sign of life") || why.contains("waiting for the peer to take more bytes"),
        "{why}"
    );
}

/// What a lying worker returns for `k` products of size `n` given A and B.
type Lie = fn(&[f64], u32, u32) -> Vec<f64>;

/// NaN everywhere.
fn all_nan(_ab: &[f64], n: u32, k: u32) -> Vec<f64> {
    vec![f64::NAN; (n * n * k) as usize]
}

/// The right products but for one entry of each, off by a millionth:
/// finite, plausible, wrong.
fn subtly_wrong(ab: &[f64], n: u32, k: u32) -> Vec<f64> {
    let mut c = dls_worker::kernel::Kernel::new(1)
        .expect("kernel")
        .multiply_batch(ab, n as usize, k as usize);
    let nn = (n * n) as usize;
    for p in 0..k as usize {
        c[p * nn + nn / 2] *= 1.0 + 1e-6;
    }
    c
}

/// A worker that follows the protocol but returns what `lie` says.
async fn lying_worker(listener: tokio::net::TcpListener, lie: Lie) {
    use dls_protocol::{FromWorker, ToWorker};
    let mut conn = common::fake_worker(listener, "liar").await;
    let mut chunks = std::collections::HashMap::new();
    // Chunks arriving in pieces, their inputs so far.
    let mut partial: std::collections::HashMap<_, Vec<f64>> = std::collections::HashMap::new();
    while let Ok(Some(f)) = conn.read_frame().await {
        let whole = match f.msg {
            ToWorker::Assign {
                job,
                chunk,
                form,
                count,
            } => Some((
                job,
                chunk,
                form,
                count,
                f.payload.to_f64(0..f.payload.len()).into_owned(),
            )),
            ToWorker::Part {
                job,
                chunk,
                form,
                count,
                ..
            } => {
                let ab = partial.entry(chunk).or_default();
                ab.extend_from_slice(&f.payload.to_f64(0..f.payload.len()));
                match ab.len() as u64 == form.in_len(count) {
                    true => partial.remove(&chunk).map(|ab| (job, chunk, form, count, ab)),
                    false => None,
                }
            }
            _ => None,
        };
        if let Some((job, chunk, form, count, ab)) = whole {
            chunks.insert(chunk, lie(&ab, form.shape.n, count));
            conn.send(&FromWorker::Received { job, chunk }).await.expect("sends");
            conn.send(&FromWorker::Ready {
                job,
                chunk,
                compute_secs: 0.0,
            })
            .await
            .expect("sends");
            continue;
        }
        match f.msg {
            ToWorker::Grant { job, chunk } => {
                let c = chunks.remove(&chunk).expect("granted an assigned chunk");
                let count = (c.len() / (N * N)) as u32;
                let form = dls_protocol::Form::square(N as u32);
                conn.write_frame(
                    &FromWorker::Results {
                        job,
                        chunk,
                        form,
                        count,
                    },
                    &c.into(),
                )
                .await
                .expect("sends");
            }
            ToWorker::Heartbeat { seq } => conn.send(&FromWorker::HeartbeatAck { seq }).await.expect("sends"),
            _ => {}
        }
    }
}

#[test]
fn nan_results_are_redone_elsewhere() {
    wrong_results_are_redone_elsewhere(all_nan);
}

#[test]
fn subtly_wrong_results_are_redone_elsewhere() {
    wrong_results_are_redone_elsewhere(subtly_wrong);
}

fn wrong_results_are_redone_elsewhere(lie: Lie) {
    let good = Proc::start(&[]);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (report, c, batch) = rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let liar = l.local_addr().expect("addr").to_string();
        tokio::spawn(lying_worker(l, lie));
        let list = format!("{liar},{}", good.addr);
        let platform = common::equal_platform(2, 0.01, 0.01, 0.005);
        let mut pool = common::pool_of(&list, None, ConnectOptions::default()).await;
        let batch = Batch::random(M, N, 3);
        let done = session::run_batch(&mut pool, &platform, &batch, &RunConfig::default(), 1, |_| {}).await;
        let d = done.expect("the run completes on the honest worker");
        (d.report, d.outcome.c.to_f64(0..d.outcome.c.len()).into_owned(), batch)
    });
    assert_eq!(report.failures.len(), 1);
    assert_eq!(report.failures[0].worker, "w0");
    assert!(
        report.failures[0].reason.contains("wrong result"),
        "{}",
        report.failures[0].reason
    );
    let nn = N * N;
    for i in 0..M {
        let want = dls_worker::kernel::naive(&batch.a_of(i).expect("A"), &batch.b_of(i).expect("B"), N);
        assert!(c[i * nn..(i + 1) * nn]
            .iter()
            .zip(&want)
            .all(|(x, y)| (x - y).abs() <= 1e-12 * N as f64));
    }
}

#[test]
fn a_straggler_is_given_up_on_when_asked() {
    // w0 computes 20000× slower than the plan believes; with a straggler
    // factor of 2 its products are redone by the others.
    let victim = Proc::start(&["--slowdown", "20000"]);
    let others = [Proc::start(&[]), Proc::start(&[])];
    let list = format!("{},{},{}", victim.addr, others[0].addr, others[1].addr);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let report = rt.block_on(async {
        let platform = common::equal_platform(3, 1e-4, 1e-4, 5e-5);
        let mut pool = common::pool_of(&list, None, ConnectOptions::default()).await;
        let cfg = RunConfig {
            options: RunOptions {
                straggler: Some(2.0),
                ..RunOptions::default()
            },
            ..RunConfig::default()
        };
        let done = session::run_batch(&mut pool, &platform, &Batch::random(M, N, 4), &cfg, 1, |_| {}).await;
        done.expect("completes").report
    });
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert_eq!(report.failures[0].worker, "w0");
    assert!(
        report.failures[0].reason.contains("straggling"),
        "{}",
        report.failures[0].reason
    );
    assert!(report.failures[0].products_lost > 0);
}

#[test]
fn losing_every_worker_fails_clearly() {
    let victim = Proc::start(&["--link-rate", "1", "--slowdown", "3000"]);
    let addr = victim.addr.clone();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let err = std::thread::scope(|s| {
        let killer = s.spawn(move || {
            let hit = Proc::wait_for(&victim.log, "computing");
            if hit {
                victim.signal("-KILL");
            }
            hit
        });
        let out = rt.block_on(async {
            let platform = Platform::new(vec![Worker::new("w0", 0.01, 0.01, 0.005)]).expect("platform");
            let mut pool = common::pool_of(&addr, None, ConnectOptions::default()).await;
            let done = session::run_batch(
                &mut pool,
                &platform,
                &Batch::random(10, N, 1),
                &RunConfig::default(),
                1,
                |_| {},
            )
            .await;
            done.err().expect("the run must fail")
        });
        assert!(killer.join().expect("killer"), "the victim never started computing");
        out
    });
    let msg = format!("{err:#}");
    assert!(
        msg.contains("every worker was lost") && msg.contains("10 of 10"),
        "{msg}"
    );
}

/// A worker that completes the handshake, then hangs up at the first probe.
async fn quitter(listener: tokio::net::TcpListener) {
    let mut conn = common::fake_worker(listener, "quitter").await;
    let _ = conn.read_frame().await;
}

#[test]
fn a_worker_lost_during_calibration_is_left_out() {
    use dls_master::session::{calibrate_available, CalibrateOptions};
    let good = Proc::start(&[]);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let bad = l.local_addr().expect("addr").to_string();
        tokio::spawn(quitter(l));
        let cluster = Cluster::from_list_indexed(&format!("{bad},{}", good.addr)).expect("cluster");
        let mut pool = Pool::connect(&cluster, None, ConnectOptions::default())
            .await
            .expect("connects");
        let (cal, left) = calibrate_available(&mut pool, &CalibrateOptions::new(16))
            .await
            .expect("the other worker is calibrated");
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].worker, "w0");
        // The hang-up shows as an end of stream when the master reads, and as
        // a reset or broken pipe when it happens while the master writes.
        let reason = &left[0].reason;
        assert!(
            ["closed the connection", "reset by peer", "Broken pipe"]
                .iter()
                .any(|s| reason.contains(s)),
            "{reason}"
        );
        assert_eq!(pool.names(), vec!["w1".to_string()]);
        let platform = cal.platform().expect("platform");
        assert_eq!(platform.len(), 1);
        // The batch runs on what is left.
        let batch = Batch::random(8, 16, 5);
        let done = session::run_batch(&mut pool, &platform, &batch, &RunConfig::default(), 1, |_| {})
            .await
            .expect("runs on w1");
        assert_eq!(done.report.workers.len(), 1);
        pool.close().await;
    });
    // The worker logs what it served when the master leaves: 8 products of
    // 16×16 (8 · 2048 bytes of results).
    let line = (0..200)
        .filter_map(|_| good.log.recv_timeout(Duration::from_secs(10)).ok())
        .find(|l| l.contains("master left"))
        .expect("the worker logs the session's end");
    assert!(
        line.contains("products=8") && line.contains("bytes_out=16384"),
        "{line}"
    );
}

#[test]
fn a_worker_hung_at_the_start_is_left_out_within_the_handshake_timeout() {
    let hung = Proc::start(&[]);
    let good = Proc::start(&[]);
    hung.signal("-STOP");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let cluster = Cluster::from_list_indexed(&format!("{},{}", hung.addr, good.addr)).expect("cluster");
        let t0 = std::time::Instant::now();
        let (mut pool, left) = Pool::connect_available(&cluster, None, ConnectOptions::default())
            .await
            .expect("the other worker answers");
        assert!(t0.elapsed() < Duration::from_secs(8), "waited {:?}", t0.elapsed());
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].worker, "w0");
        assert!(left[0].reason.contains("timed out"), "{}", left[0].reason);
        assert_eq!(pool.names(), vec!["w1".to_string()]);
        pool.close().await;
    });
}

/// A run given no platform measures its workers on the batch's first
/// products; a worker that hangs up at its probe chunk is left out, its
/// probe products are redone by the other, and the rest of the batch runs
/// on that one: every product right, each counted once.
#[test]
fn a_worker_lost_while_probed_in_a_run_is_left_out() {
    let good = Proc::start(&[]);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let batch = Batch::random(M, N, 11);
    let (report, c) = rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let bad = l.local_addr().expect("addr").to_string();
        tokio::spawn(quitter(l));
        let cluster = Cluster::from_list_indexed(&format!("{bad},{}", good.addr)).expect("cluster");
        let workers = session::Workers::new(cluster, None);
        let mut sink = batch.memory_sink().expect("memory");
        let cfg = RunConfig {
            verify: 5,
            ..RunConfig::default()
        };
        let done = session::run(&workers, None, None, &batch, &cfg, &mut sink, |_| {})
            .await
            .expect("the run completes on the other worker");
        (done.report, sink.0.to_f64(0..sink.0.len()).into_owned())
    });
    assert_all_right(&c, &batch);
    let probes = report.probes.as_ref().expect("calibrated within the run");
    assert!(probes.products >= 2, "{probes:?}");
    assert_eq!(report.left_out.len(), 1, "{:?}", report.left_out);
    assert_eq!(report.left_out[0].worker, "w0");
    assert!(
        report.left_out[0].reason.contains("lost while measured"),
        "{}",
        report.left_out[0].reason
    );
    assert_eq!(report.load as usize, M);
    assert_eq!(report.workers.len(), 1, "the rest ran on w1 alone");
    assert_eq!(report.workers[0].products as usize, M, "every product counted once");
    assert_eq!(report.verified, 5);
}
