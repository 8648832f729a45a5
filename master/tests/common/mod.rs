#![allow(dead_code)]
//! Worker daemons on 127.0.0.1 for the master's tests: real `dls_worker::serve`
//! loops on real sockets, in a runtime of their own that stops when dropped.

pub mod cli;

use dls_protocol::Token;

/// The methods `dls experiment baselines` compares, in the order it runs
/// them.
pub const BASELINE_METHODS: [&str; 9] = [
    "plan",
    "lifo",
    "rounds",
    "default (best)",
    "equal",
    "proportional",
    "self-scheduling",
    "factoring",
    "weighted-factoring",
];
use std::time::Duration;

pub struct Workers {
    pub addrs: Vec<String>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// One worker per (link rate in MB/s, slowdown).
pub fn start(specs: &[(Option<f64>, f64)], token: Option<&str>) -> Workers {
    start_holding(specs, token, 1 << 30)
}

/// As [`start`], each worker holding at most `memory_limit` bytes of
/// matrices at once.
pub fn start_holding(specs: &[(Option<f64>, f64)], token: Option<&str>, memory_limit: u64) -> Workers {
    start_with(
        specs,
        token,
        memory_limit,
        Duration::from_secs(dls_worker::server::DEFAULT_IDLE_SECS),
    )
}

/// As [`start_holding`], each worker ending a session after `idle` without
/// a frame from its master.
pub fn start_with(specs: &[(Option<f64>, f64)], token: Option<&str>, memory_limit: u64, idle: Duration) -> Workers {
    start_full(specs, token, memory_limit, idle, None)
}

/// As [`start`], every worker behind one emulated uplink of `rate` MB/s
/// (each way if `duplex`, both ways together if not), as behind a switch.
pub fn start_behind(specs: &[(Option<f64>, f64)], rate: f64, duplex: bool) -> Workers {
    let uplink = dls_worker::throttle::SharedUplink::new(rate * 1e6, duplex).expect("a positive rate");
    let idle = Duration::from_secs(dls_worker::server::DEFAULT_IDLE_SECS);
    start_full(specs, None, 1 << 30, idle, Some(uplink))
}

fn start_full(
    specs: &[(Option<f64>, f64)],
    token: Option<&str>,
    memory_limit: u64,
    idle: Duration,
    uplink: Option<dls_worker::throttle::SharedUplink>,
) -> Workers {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let specs = specs.to_vec();
    let count = specs.len();
    let token = token.and_then(Token::parse);
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let mut handles = Vec::new();
            for (rate, slowdown) in specs {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
                addr_tx
                    .send(l.local_addr().expect("addr").to_string())
                    .expect("sends addr");
                let mut cfg = dls_worker::Config::new(1, memory_limit);
                cfg.link_rate = rate.map(|r| r * 1e6);
                cfg.uplink = uplink.clone();
                cfg.slowdown = slowdown;
                cfg.token = token.clone();
                cfg.handshake_timeout = Duration::from_secs(2);
                cfg.idle_timeout = idle;
                let mut stop = stop_rx.clone();
                handles.push(tokio::spawn(dls_worker::serve(l, cfg, async move {
                    let _ = stop.changed().await;
                })));
            }
            for h in handles {
                let _ = h.await;
            }
        });
    });
    let addrs = (0..count)
        .map(|_| addr_rx.recv_timeout(Duration::from_secs(10)).expect("a worker started"))
        .collect();
    Workers {
        addrs,
        stop: Some(stop_tx),
        thread: Some(thread),
    }
}

impl Workers {
    pub fn list(&self) -> String {
        self.addrs.join(",")
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// C = A·B by the textbook loop in float64, for every product of a
/// square float64 batch laid out back to back.
pub fn naive_all(a: &[f64], b: &[f64], m: usize, n: usize) -> Vec<f64> {
    let nn = n * n;
    (0..m)
        .flat_map(|i| dls_worker::kernel::naive(&a[i * nn..(i + 1) * nn], &b[i * nn..(i + 1) * nn], n))
        .collect()
}

/// C of any batch by the textbook loop in float64, and Σ|A||B| of each
/// entry (the scale of its rounding).
pub fn naive_batch(batch: &dls_master::session::Batch) -> (Vec<f64>, Vec<f64>) {
    use dls_worker::kernel::naive_dims;
    let d = batch.dims();
    let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<f64>>();
    let (mut c, mut scale) = (Vec::new(), Vec::new());
    for i in 0..batch.count {
        let (a, b) = (batch.a_of(i).expect("A"), batch.b_of(i).expect("B"));
        c.extend(naive_dims(&a, &b, d));
        scale.extend(naive_dims(&abs(&a), &abs(&b), d));
    }
    (c, scale)
}

/// Every entry of C within (k + 2)·ε of its type times Σ|A||B| of the
/// naive product: the rounding any summation order may make.
pub fn assert_batch_right(batch: &dls_master::session::Batch, c: &dls_protocol::Values) {
    assert_eq!(c.dtype(), batch.form.dtype, "C keeps the inputs' type");
    let (want, scale) = naive_batch(batch);
    assert_eq!(c.len(), want.len());
    let eps = (batch.form.shape.k as f64 + 2.0) * batch.form.dtype.epsilon();
    for (i, (y, s)) in want.iter().zip(&scale).enumerate() {
        let x = c.get(i);
        assert!((x - y).abs() <= eps * s, "{}: value {i}: {x} vs {y}", batch.form);
    }
}

pub fn assert_close(got: &[f64], want: &[f64], n: usize) {
    assert_eq!(got.len(), want.len());
    for (i, (x, y)) in got.iter().zip(want).enumerate() {
        assert!((x - y).abs() <= 1e-12 * n as f64, "value {i}: {x} vs {y}");
    }
}

/// Connect to the started workers (named w0, w1, ...).
pub async fn connect(w: &Workers) -> dls_master::session::Pool {
    let cluster = dls_master::config::cluster::Cluster::from_list_indexed(&w.list()).expect("cluster");
    dls_master::session::Pool::connect(&cluster, None, dls_master::session::ConnectOptions::default())
        .await
        .expect("connects")
}

/// A platform of `p` workers named w0, w1, ... with the same costs.
pub fn alike(p: usize, c: f64, w: f64, d: f64) -> dls_lp::Platform {
    dls_lp::Platform::new((0..p).map(|i| dls_lp::Worker::new(format!("w{i}"), c, w, d)).collect()).expect("platform")
}
