//! Lose a worker, lose no part of C: one large product on real worker
//! processes, one killed (kill -9) once it has received panels, and one
//! that returns a wrong piece. The rectangles they had not returned are cut
//! again over the others, and C is the product.

use dls_master::session::{self, ConnectOptions, MemoryC, ProductConfig, ProductJob, ProductRun};
use dls_protocol::{DType, Form, Values};
use std::sync::Arc;
use std::time::Duration;
mod common;
use common::Proc;

const N: usize = 120;
const K: usize = 90;
const M: usize = 100;

/// Run the product on the workers of `list` (named w0, w1, ...) with
/// equal rough costs: C and what the run measured.
fn run_on(list: &str, p: usize, job: &Arc<ProductJob>) -> (ProductRun, Values) {
    let platform = common::equal_platform(p, 0.01, 0.02, 0.005);
    let form = Form::square(32);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // Small panels: many messages, so the victim is hit partway.
    let cfg = ProductConfig {
        panel_bytes: 16 << 10,
        select: false,
        ..ProductConfig::default()
    };
    rt.block_on(async {
        let mut pool = common::pool_of(list, None, ConnectOptions::default()).await;
        let mut sink = MemoryC {
            c: Values::zeros(DType::F64, N * M),
            m: M,
        };
        let done = tokio::time::timeout(
            Duration::from_secs(120),
            session::run_product_on(&mut pool, &platform, &form, job.clone(), &cfg, &mut sink, |_| {}),
        )
        .await
        .expect("the run ends by itself")
        .unwrap_or_else(|e| panic!("the product failed: {e:#}"));
        pool.close().await;
        (done, sink.c)
    })
}

fn assert_is_the_product(job: &ProductJob, c: &Values) {
    let a = job.a.source.read(0..N * K).expect("A").to_f64(0..N * K).into_owned();
    let b = job.b.source.read(0..K * M).expect("B").to_f64(0..K * M).into_owned();
    let want = dls_worker::kernel::naive_dims(&a, &b, dls_worker::kernel::Dims { n: N, k: K, m: M });
    for (i, (x, y)) in c.to_f64(0..N * M).iter().zip(&want).enumerate() {
        assert!((x - y).abs() <= 1e-12 * K as f64, "C[{}][{}]: {x} vs {y}", i / M, i % M);
    }
}

#[test]
fn a_worker_killed_partway_has_its_rectangle_cut_again() {
    // The victim's link is slow, so it is still receiving when killed.
    let victim = Proc::start(&["--link-rate", "2"]);
    let others = [Proc::start(&[]), Proc::start(&[])];
    let list = format!("{},{},{}", victim.addr, others[0].addr, others[1].addr);
    let job = Arc::new(ProductJob::random(N, K, M, DType::F64, 5).expect("inputs"));
    let (done, c) = std::thread::scope(|s| {
        let killer = s.spawn(move || {
            let hit = Proc::wait_for(&victim.log, "panel received");
            if hit {
                victim.signal("-KILL");
            }
            (hit, victim)
        });
        let out = run_on(&list, 3, &job);
        let (hit, victim) = killer.join().expect("killer");
        assert!(hit, "the victim never received a panel");
        drop(victim);
        out
    });
    assert_is_the_product(&job, &c);
    let losses = &done.measured.losses;
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0].worker, 0);
    assert!(losses[0].elements > 0, "it had work in hand");
    // What it lost was computed by the others.
    let redone: usize = done
        .measured
        .transfers
        .iter()
        .filter(|t| t.panel.is_none() && t.worker != 0)
        .count();
    assert!(redone > 2, "{redone} pieces returned by the survivors");
}

/// A worker that follows the protocol but adds every panel one too many
/// times into one entry of its piece: finite, plausible, wrong.
async fn lying_worker(listener: tokio::net::TcpListener) {
    use dls_protocol::{FromWorker, ToWorker};
    let mut conn = common::fake_worker(listener, "liar").await;
    let mut pieces: std::collections::HashMap<_, (Form, Vec<f64>)> = std::collections::HashMap::new();
    while let Ok(Some(f)) = conn.read_frame().await {
        match f.msg {
            ToWorker::Panel {
                job,
                piece,
                form,
                depth,
                ..
            } => {
                let (h, kp, w) = (form.shape.n as usize, form.shape.k as usize, form.shape.m as usize);
                let v = f.payload.to_f64(0..f.payload.len());
                let (a, b) = v.split_at(h * kp);
                let mut whole = form;
                whole.shape.k = depth;
                let acc = &mut pieces.entry(piece).or_insert_with(|| (whole, vec![0.0; h * w])).1;
                let part = dls_worker::kernel::naive_dims(a, b, dls_worker::kernel::Dims { n: h, k: kp, m: w });
                for (x, y) in acc.iter_mut().zip(part) {
                    *x += y;
                }
                acc[0] += 1e-3;
                conn.send(&FromWorker::Received { job, chunk: piece })
                    .await
                    .expect("sends");
                let ready = FromWorker::Ready {
                    job,
                    chunk: piece,
                    compute_secs: 0.0,
                };
                conn.send(&ready).await.expect("sends");
            }
            ToWorker::Grant { job, chunk } => {
                let (form, c) = pieces.remove(&chunk).expect("granted a piece it has");
                let msg = FromWorker::Results {
                    job,
                    chunk,
                    form,
                    count: 1,
                };
                conn.write_frame(&msg, &c.into()).await.expect("sends");
            }
            ToWorker::Heartbeat { seq } => conn.send(&FromWorker::HeartbeatAck { seq }).await.expect("sends"),
            _ => {}
        }
    }
}

#[test]
fn a_wrong_piece_is_caught_and_its_rectangle_cut_again() {
    let good = [Proc::start(&[]), Proc::start(&[])];
    let job = Arc::new(ProductJob::random(N, K, M, DType::F64, 8).expect("inputs"));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let liar = rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let addr = l.local_addr().expect("addr").to_string();
        rt.spawn(lying_worker(l));
        addr
    });
    let list = format!("{liar},{},{}", good[0].addr, good[1].addr);
    let (done, c) = run_on(&list, 3, &job);
    assert_is_the_product(&job, &c);
    let losses = &done.measured.losses;
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0].worker, 0);
    assert!(losses[0].reason.contains("wrong result"), "{}", losses[0].reason);
}
