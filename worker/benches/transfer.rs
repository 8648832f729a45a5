//! Bulk path: master → worker chunks over loopback through `Connection`
//! (header + raw f64 payload, decoded into a fresh `Vec<f64>`), against a
//! plain TCP socket moving the same bytes, in the same run.
//!
//! `cargo bench -p dls-worker --bench transfer [-- ROUNDS]`
//!
//! Also the chunk as the master sends it now: in `Part` frames of 256 KiB,
//! at most 128 KiB left unsent in the kernel (`short_send_queue`), so
//! that a grant can go out between two pieces.
//!
//! Also the same Connection with every frame encrypted (`--encrypt`), with
//! each cipher: AES-256-GCM (what two machines with AES instructions agree
//! on) and ChaCha20-Poly1305 (the fallback).
//!
//! Each round sends one 64 MiB chunk each way of doing it, alternating which
//! goes first; a transfer ends when the receiver has every byte and says so
//! (one-byte acknowledgement). Prints medians and their ratio.

use dls_protocol::{seal, ChunkId, Cipher, Connection, FromWorker, JobId, ToWorker};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const N: u32 = 512;
const K: u32 = 16; // 2 · 16 · 512² f64 = 64 MiB

async fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = l.local_addr().expect("addr");
    let (a, b) = tokio::join!(TcpStream::connect(addr), l.accept());
    let a = a.expect("connects");
    let b = b.expect("accepts").0;
    a.set_nodelay(true).expect("nodelay");
    b.set_nodelay(true).expect("nodelay");
    (a, b)
}

async fn raw_round(bytes: &[u8]) -> Duration {
    let (mut tx, mut rx) = pair().await;
    let len = bytes.len();
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; len];
        rx.read_exact(&mut buf).await.expect("reads");
        rx.write_all(&[1]).await.expect("acks");
        std::hint::black_box(buf);
    });
    let t = Instant::now();
    tx.write_all(bytes).await.expect("writes");
    let mut ack = [0u8];
    tx.read_exact(&mut ack).await.expect("ack");
    let d = t.elapsed();
    reader.await.expect("reader");
    d
}

async fn framed_round(payload: &dls_protocol::Values, sealed: Option<Cipher>) -> Duration {
    let (tx, rx) = pair().await;
    let mut master: Connection<_, FromWorker, ToWorker> = Connection::new(tx);
    master.set_max_frame(1 << 32);
    let token = dls_protocol::Token::parse("transfer-bench-token-0123456789").expect("token");
    let (nm, nw) = ([1u8; 32], [2u8; 32]);
    if let Some(cipher) = sealed {
        let (send, recv) = seal::sealers(&token, &nm, &nw, seal::Side::Master, cipher);
        master.seal_with(send, recv);
    }
    let reader = tokio::spawn(async move {
        let mut worker: Connection<_, ToWorker, FromWorker> = Connection::new(rx);
        worker.set_max_frame(1 << 32);
        if let Some(cipher) = sealed {
            let (send, recv) = seal::sealers(&token, &nm, &nw, seal::Side::Worker, cipher);
            worker.seal_with(send, recv);
        }
        let f = worker.read_frame().await.expect("valid").expect("a frame");
        let (job, chunk) = match f.msg {
            ToWorker::Assign { job, chunk, .. } => (job, chunk),
            other => panic!("{other:?}"),
        };
        worker.send(&FromWorker::Received { job, chunk }).await.expect("acks");
        std::hint::black_box(f.payload);
    });
    let t = Instant::now();
    master
        .write_frame(
            &ToWorker::Assign {
                job: JobId(1),
                chunk: ChunkId(1),
                form: dls_protocol::Form::square(N),
                count: K,
            },
            payload,
        )
        .await
        .expect("writes");
    let ack = master.read_frame().await.expect("valid").expect("ack");
    let d = t.elapsed();
    assert!(matches!(ack.msg, FromWorker::Received { .. }));
    reader.await.expect("reader");
    d
}

/// The chunk in pieces of `PIECE` bytes, the sender's unsent queue kept
/// short, the receiver putting the pieces together.
async fn pieced_round(payload: &dls_protocol::Values) -> Duration {
    const PIECE: usize = 256 << 10;
    let (tx, rx) = pair().await;
    dls_common::short_send_queue(&tx);
    let mut master: Connection<_, FromWorker, ToWorker> = Connection::new(tx);
    master.set_max_frame(1 << 32);
    let form = dls_protocol::Form::square(N);
    let total = payload.len();
    let reader = tokio::spawn(async move {
        let mut worker: Connection<_, ToWorker, FromWorker> = Connection::new(rx);
        worker.set_max_frame(1 << 32);
        let mut inputs = dls_protocol::Values::zeros(dls_protocol::DType::F64, total);
        let mut filled = 0;
        while filled < total {
            let f = worker.read_frame().await.expect("valid").expect("a frame");
            assert!(matches!(f.msg, ToWorker::Part { .. }));
            inputs.copy_in(filled, &f.payload).expect("fits");
            filled += f.payload.len();
        }
        let (job, chunk) = (JobId(1), ChunkId(1));
        worker.send(&FromWorker::Received { job, chunk }).await.expect("acks");
        std::hint::black_box(inputs);
    });
    let t = Instant::now();
    let step = PIECE / 8;
    for lo in (0..total).step_by(step) {
        let hi = (lo + step).min(total);
        let msg = ToWorker::Part {
            job: JobId(1),
            chunk: ChunkId(1),
            form,
            count: K,
            len: (hi - lo) as u64,
        };
        master.write_frame(&msg, &payload.slice(lo..hi)).await.expect("writes");
    }
    let ack = master.read_frame().await.expect("valid").expect("ack");
    let d = t.elapsed();
    assert!(matches!(ack.msg, FromWorker::Received { .. }));
    reader.await.expect("reader");
    d
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(15);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let values = (2 * K * N * N) as usize;
    let payload: Vec<f64> = (0..values).map(|i| i as f64).collect();
    let bytes: Vec<u8> = payload.iter().flat_map(|v| v.to_le_bytes()).collect();
    let payload = dls_protocol::Values::F64(payload);
    let mb = bytes.len() as f64 / 1e6;
    let (aes, chacha) = (Some(Cipher::Aes256Gcm), Some(Cipher::ChaCha20Poly1305));
    let (mut raw, mut ours, mut sealed, mut fallback) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut pieced = Vec::new();
    rt.block_on(async {
        // Warm up every path once.
        raw_round(&bytes).await;
        framed_round(&payload, None).await;
        pieced_round(&payload).await;
        framed_round(&payload, aes).await;
        framed_round(&payload, chacha).await;
        for r in 0..rounds {
            if r % 2 == 0 {
                raw.push(mb / raw_round(&bytes).await.as_secs_f64());
                ours.push(mb / framed_round(&payload, None).await.as_secs_f64());
                pieced.push(mb / pieced_round(&payload).await.as_secs_f64());
                sealed.push(mb / framed_round(&payload, aes).await.as_secs_f64());
                fallback.push(mb / framed_round(&payload, chacha).await.as_secs_f64());
            } else {
                fallback.push(mb / framed_round(&payload, chacha).await.as_secs_f64());
                sealed.push(mb / framed_round(&payload, aes).await.as_secs_f64());
                pieced.push(mb / pieced_round(&payload).await.as_secs_f64());
                ours.push(mb / framed_round(&payload, None).await.as_secs_f64());
                raw.push(mb / raw_round(&bytes).await.as_secs_f64());
            }
        }
    });
    let (r, o, e, f) = (median(raw), median(ours), median(sealed), median(fallback));
    let pc = median(pieced);
    let agreed = seal::fast_ciphers()[0];
    println!("bulk transfer, {mb:.1} MB chunk, {rounds} rounds, medians:");
    println!("  raw TCP                                   {r:8.0} MB/s");
    println!("  dls Connection                            {o:8.0} MB/s");
    println!("  dls Connection, in pieces, short queue    {pc:8.0} MB/s");
    println!("  dls Connection, --encrypt, AES-256-GCM    {e:8.0} MB/s");
    println!("  dls Connection, --encrypt, ChaCha20-Poly1305 {f:5.0} MB/s");
    println!("  ratio (plain / raw)                       {:8.3}", o / r);
    println!("  ratio (in pieces / raw)                   {:8.3}", pc / r);
    println!("  ratio (AES-256-GCM / plain)               {:8.3}", e / o);
    println!("  ratio (ChaCha20-Poly1305 / plain)         {:8.3}", f / o);
    println!("  (this machine's two ends agree on {})", agreed.name());
}
