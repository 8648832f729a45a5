//! The cost of checking one product with Freivalds' test (the part worked
//! out from A and B while the worker computes, and the pass over C when it
//! arrives, which delays the port), against moving
//! that product over loopback (A and B to a worker, C back, through the
//! protocol's `Connection`), and against recomputing it (the naive kernel
//! `--verify` uses), in the same run.
//!
//! `cargo bench -p dls-master --bench check [-- N [ROUNDS]]` (default
//! n = 256, 31 rounds). Prints medians and ratios.

use dls_master::session::check::{probe, Expected};
use dls_protocol::{ChunkId, Connection, DType, Form, FromWorker, JobId, ToWorker, Values};
use dls_worker::kernel::{self, Dims, Kernel};
use rand::SeedableRng;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};

/// One product's round trip: A and B out in an Assign frame, C back in a
/// Results frame, on a fresh loopback connection.
async fn transfer(ab: &Values, c: &[f64], n: u32) -> Duration {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = l.local_addr().expect("addr");
    let (tx, rx) = tokio::join!(TcpStream::connect(addr), l.accept());
    let (tx, rx) = (tx.expect("connects"), rx.expect("accepts").0);
    tx.set_nodelay(true).expect("nodelay");
    rx.set_nodelay(true).expect("nodelay");
    let c = c.to_vec();
    let worker = tokio::spawn(async move {
        let mut w: Connection<_, ToWorker, FromWorker> = Connection::new(rx);
        w.set_max_frame(1 << 32);
        let f = w.read_frame().await.expect("valid").expect("a frame");
        let ToWorker::Assign {
            job,
            chunk,
            form,
            count,
        } = f.msg
        else {
            panic!("expected an Assign")
        };
        std::hint::black_box(f.payload);
        w.write_frame(
            &FromWorker::Results {
                job,
                chunk,
                form,
                count,
            },
            &Values::F64(c),
        )
        .await
        .expect("writes");
    });
    let mut m: Connection<_, FromWorker, ToWorker> = Connection::new(tx);
    m.set_max_frame(1 << 32);
    let t = Instant::now();
    let assign = ToWorker::Assign {
        job: JobId(1),
        chunk: ChunkId(1),
        form: Form::square(n),
        count: 1,
    };
    m.write_frame(&assign, ab).await.expect("writes");
    let back = m.read_frame().await.expect("valid").expect("results");
    let d = t.elapsed();
    std::hint::black_box(back.payload);
    worker.await.expect("worker");
    d
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1).filter_map(|a| a.parse::<usize>().ok());
    let n = args.next().unwrap_or(256);
    let rounds = args.next().unwrap_or(31);
    let nn = n * n;
    let mut ab = vec![0.0; 2 * nn];
    kernel::fill_random(&mut ab, 1);
    let c = Kernel::new(1).expect("kernel").multiply_batch(&ab, n, 1);
    let (a, b) = ab.split_at(nn);
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (mut moved, mut ahead, mut on_arrival, mut redone) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let ab_values = Values::F64(ab.clone());
    rt.block_on(transfer(&ab_values, &c, n as u32)); // warm-up
    for r in 0..rounds {
        moved.push(rt.block_on(transfer(&ab_values, &c, n as u32)).as_secs_f64());
        // Fresh copies each round, as the master's A, B and C are not all
        // in cache when it checks.
        let (a2, b2, c2) = (a.to_vec(), b.to_vec(), c.clone());
        let t = Instant::now();
        let e = Expected::new(&a2, &b2, Dims::square(n), probe(n, &mut rng), DType::F64);
        ahead.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        e.check(&a2, &b2, &c2).expect("a right product passes");
        on_arrival.push(t.elapsed().as_secs_f64());
        if r < 3 {
            let t = Instant::now();
            std::hint::black_box(kernel::naive(a, b, n));
            redone.push(t.elapsed().as_secs_f64());
        }
    }
    let (m, ah, ar, re) = (median(moved), median(ahead), median(on_arrival), median(redone));
    println!("one product of n = {n}, {rounds} rounds, medians:");
    println!("  transfer (A, B out, C back)         {:9.3} ms", m * 1e3);
    println!("  test, from A and B (while computing) {:8.3} ms", ah * 1e3);
    println!("  test, on C's arrival                {:9.3} ms", ar * 1e3);
    println!("  naive recomputation                 {:9.3} ms", re * 1e3);
    println!("  whole test / transfer               {:9.3}", (ah + ar) / m);
    println!("  on arrival / transfer               {:9.3}", ar / m);
    println!("  whole test / recomputation          {:9.5}", (ah + ar) / re);
}
