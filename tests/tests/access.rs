//! Who gets a worker: a flood of clients without the token never keeps a
//! master out, and a master that stops answering lets its worker go.

mod common;
use common::{token_file, Proc};
use dls_master::config::cluster::Cluster;
use dls_master::session::ConnectOptions;
use dls_master::session::Pool;
use dls_protocol::Token;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use common::TOKEN;

async fn connect(addr: &str) -> anyhow::Result<Pool> {
    let cluster = Cluster::from_list_indexed(addr)?;
    let token = Token::parse(TOKEN).expect("token");
    Pool::connect(&cluster, Some(&token), ConnectOptions::default()).await
}

/// Keep `held` connections open to `addr` and open a new one whenever the
/// worker closes one, until `until`. Returns how many were opened.
async fn flood(addr: String, held: usize, until: Instant) -> usize {
    let mut opened = 0;
    let mut set = tokio::task::JoinSet::new();
    while Instant::now() < until {
        while set.len() < held {
            let Ok(mut s) = TcpStream::connect(&addr).await else {
                break;
            };
            opened += 1;
            set.spawn(async move {
                // Say nothing; wait for the worker to hang up.
                let mut buf = [0u8; 256];
                while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
        let _ = tokio::time::timeout(Duration::from_millis(20), set.join_next()).await;
    }
    set.abort_all();
    opened
}

#[test]
fn a_flood_of_clients_without_the_token_never_keeps_a_master_out() {
    let tok = token_file("flood");
    let worker = Proc::start(&["--token-file", tok.to_str().expect("utf-8")]);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (got_in, opened) = rt.block_on(async {
        let until = Instant::now() + Duration::from_secs(4);
        let flooder = tokio::spawn(flood(worker.addr.clone(), 48, until));
        // Let the flood fill every slot first.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut got_in = 0;
        for _ in 0..10 {
            match connect(&worker.addr).await {
                Ok(mut pool) => {
                    got_in += 1;
                    pool.close().await;
                }
                Err(e) => eprintln!("refused: {e:#}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (got_in, flooder.await.expect("flood task"))
    });
    assert_eq!(got_in, 10, "every master got in while the flood ran");
    assert!(
        opened > 48,
        "the flood reopened what the worker dropped ({opened} opened)"
    );
    // The worker's log about it stays bounded: at most a line a second per
    // kind, not one per connection.
    let lines: Vec<String> = worker.log.try_iter().filter(|l| l.contains("connection")).collect();
    assert!(
        lines.len() < 30,
        "{} log lines about {opened} connections:\n{}",
        lines.len(),
        lines.join("\n")
    );
}

#[test]
fn a_silent_master_lets_its_worker_go_after_the_idle_timeout() {
    let tok = token_file("idle");
    let worker = Proc::start(&["--token-file", tok.to_str().expect("utf-8"), "--idle-timeout", "2"]);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        // The first master holds the worker and says nothing more, as a
        // master stopped with SIGSTOP would.
        let _silent = connect(&worker.addr).await.expect("the first master gets in");
        let e = connect(&worker.addr).await.err().expect("the worker is busy");
        assert!(format!("{e:#}").contains("busy serving another master"), "{e:#}");
        let t = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            match connect(&worker.addr).await {
                Ok(mut pool) => {
                    pool.close().await;
                    break;
                }
                Err(e) if t.elapsed() < Duration::from_secs(10) => {
                    assert!(format!("{e:#}").contains("busy"), "{e:#}")
                }
                Err(e) => panic!("still refused after 10 s: {e:#}"),
            }
        }
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_secs(1),
            "the worker waited for the idle timeout ({waited:?})"
        );
    });
    assert!(Proc::wait_for(&worker.log, "any frame from the master"));
}
