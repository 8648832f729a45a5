//! A man in the middle flips bits in what a real worker sends the master.
//! The run must end with every product right, or fail naming that worker;
//! never succeed with a wrong product.

mod common;
use common::{token_file, Proc, TOKEN};
use dls_master::session::Batch;
use dls_master::session::ConnectOptions;
use dls_master::session::{self, RunConfig};
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const N: usize = 48;
const M: usize = 40;

/// Relay one connection from `listener` to `target`, flipping one random
/// bit in about one byte in `every` of what the worker sends, after the
/// first `clean` bytes (the handshake).
async fn proxy(listener: TcpListener, target: String, every: u64, clean: u64, seed: u64) {
    let (client, _) = listener.accept().await.expect("accepts");
    let server = TcpStream::connect(&target).await.expect("reaches the worker");
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = async move {
        let _ = tokio::io::copy(&mut cr, &mut sw).await;
        let _ = sw.shutdown().await;
    };
    let down = async move {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut buf = vec![0u8; 64 << 10];
        let mut at = 0u64;
        loop {
            let n = match sr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for (i, b) in buf[..n].iter_mut().enumerate() {
                if at + i as u64 >= clean && rng.random_range(0..every) == 0 {
                    *b ^= 1 << rng.random_range(0..8);
                }
            }
            at += n as u64;
            if cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = cw.shutdown().await;
    };
    tokio::join!(up, down);
}

/// Whether every entry of C is within a user's tolerance of the naive
/// product: 1e-8 of Σⱼ|Aᵢⱼ|·|Bⱼₖ| (rounding is below 1e-13 here).
fn all_right(batch: &Batch, c: &dls_protocol::Values) -> Result<(), String> {
    let nn = N * N;
    let c = c.to_f64(0..c.len());
    for p in 0..M {
        let (a, b) = (&batch.a_of(p).expect("A"), &batch.b_of(p).expect("B"));
        let want = dls_worker::kernel::naive(a, b, N);
        for i in 0..N {
            for k in 0..N {
                let scale: f64 = (0..N).map(|j| (a[i * N + j] * b[j * N + k]).abs()).sum();
                let got = c[p * nn + i * N + k];
                let off = (got - want[i * N + k]).abs();
                if off.is_nan() || off > 1e-8 * scale {
                    return Err(format!(
                        "product {p} at ({i}, {k}): {got} instead of {}",
                        want[i * N + k]
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Run a batch of M products of size N (seed `seed`) on two workers, the
/// first reached through a proxy flipping a bit in about one byte in
/// `every` of what it sends.
async fn run_through_proxy(
    workers: &[Proc; 2],
    seed: u64,
    every: u64,
    token: Option<&dls_protocol::Token>,
    t: ConnectOptions,
) -> (anyhow::Result<session::BatchRun>, Batch) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let via = l.local_addr().expect("addr").to_string();
    tokio::spawn(proxy(l, workers[0].addr.clone(), every, 4096, seed));
    let list = format!("{via},{}", workers[1].addr);
    let platform = common::equal_platform(2, 0.01, 0.01, 0.005);
    let mut pool = common::pool_of(&list, token, t).await;
    let batch = Batch::random(M, N, seed);
    let cfg = RunConfig {
        verify: 0,
        ..RunConfig::default()
    };
    let done = session::run_batch(&mut pool, &platform, &batch, &cfg, 1, |_| {}).await;
    pool.close().await;
    (done, batch)
}

#[test]
fn with_encryption_every_flipped_bit_is_caught_and_pinned_on_the_link() {
    let tok = token_file("mitm-sealed");
    let tok = tok.to_str().expect("utf-8");
    let workers = [
        Proc::start(&["--token-file", tok, "--encrypt"]),
        Proc::start(&["--token-file", tok, "--encrypt"]),
    ];
    let token = dls_protocol::Token::parse(TOKEN).expect("token");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    for (seed, every) in [(11, 50_000), (12, 20_000), (13, 5_000)] {
        let t = ConnectOptions {
            encrypt: true,
            ..ConnectOptions::default()
        };
        let (done, batch) = rt.block_on(run_through_proxy(&workers, seed, every, Some(&token), t));
        let done = done.expect("the other worker finishes the batch");
        all_right(&batch, &done.outcome.c).unwrap_or_else(|e| panic!("every={every}: {e}"));
        // About 370 kB of results cross the proxy: with a flip every 50 kB
        // or less one is all but certain, and it is caught by the frame's
        // authentication, whichever bit it is.
        assert_eq!(
            done.report.failures.len(),
            1,
            "every={every}: {:?}",
            done.report.failures
        );
        let f = &done.report.failures[0];
        assert_eq!(f.worker, "w0");
        assert!(f.reason.contains("authentication"), "{}", f.reason);
    }
}

#[test]
fn bit_flips_between_a_worker_and_the_master_never_pass_as_results() {
    let workers = [Proc::start(&[]), Proc::start(&[])];
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (mut succeeded, mut caught) = (0, 0);
    // From a flip in about every 2 kB to one in every 200 kB of results.
    for (seed, every) in [
        (1, 2_000),
        (2, 20_000),
        (3, 50_000),
        (4, 200_000),
        (5, 100_000),
        (6, 5_000),
    ] {
        let outcome = rt.block_on(run_through_proxy(
            &workers,
            seed,
            every,
            None,
            ConnectOptions::default(),
        ));
        match outcome {
            (Ok(d), batch) => {
                all_right(&batch, &d.outcome.c)
                    .unwrap_or_else(|e| panic!("every={every}: a wrong product passed: {e}"));
                succeeded += 1;
                // Whatever was caught was pinned on the worker behind the proxy.
                for f in &d.report.failures {
                    assert_eq!(f.worker, "w0", "{f:?}");
                    caught += 1;
                }
            }
            (Err(e), _) => {
                let e = format!("{e:#}");
                assert!(e.contains("w0"), "every={every}: failed without naming the worker: {e}");
            }
        }
    }
    assert!(
        succeeded >= 4,
        "the honest worker finished the batch in most runs ({succeeded} of 6)"
    );
    assert!(caught >= 3, "the flips were seen ({caught} runs gave w0 up)");
}
