//! Encrypted connections (`--encrypt`) over an in-memory stream: frames of
//! every kind round-trip, nothing of the plaintext crosses, any change in
//! transit fails, and the two sides agree on whether to encrypt.

mod common;
use common::{caps, T};
use dls_protocol::handshake;
use dls_protocol::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

const TOKEN: &str = "sealed-test-token-0123456789";

type M<S> = Connection<S, FromWorker, ToWorker>;
type W<S> = Connection<S, ToWorker, FromWorker>;

/// A master and a worker after the handshake: `encrypt` asked by the
/// master, `require`d by the worker.
async fn sealed_pair(encrypt: bool, require: bool) -> (Result<M<DuplexStream>>, Result<W<DuplexStream>>) {
    let (a, b) = tokio::io::duplex(1 << 20);
    shake(a, b, encrypt, require).await
}

/// The handshake between a master on `a` and a worker on `b`, both with
/// the test token.
async fn shake(
    a: DuplexStream,
    b: DuplexStream,
    encrypt: bool,
    require: bool,
) -> (Result<M<DuplexStream>>, Result<W<DuplexStream>>) {
    let t = Token::parse(TOKEN);
    let t2 = t.clone();
    let master = async move {
        let mut m: M<_> = Connection::new(a);
        handshake::master_sealed(&mut m, t.as_ref(), 1 << 30, T, encrypt)
            .await
            .map(|_| m)
    };
    let worker = async move {
        let mut w: W<_> = Connection::new(b);
        let c = caps();
        handshake::worker(
            &mut w,
            &handshake::WorkerSide {
                require_encrypt: require,
                ..common::worker_side(t2.as_ref(), &c)
            },
            || {},
            || Ok(()),
        )
        .await
        .map(|_| w)
    };
    tokio::join!(master, worker)
}

#[tokio::test]
async fn frames_of_every_size_round_trip_both_ways() {
    let (m, w) = sealed_pair(true, true).await;
    let (mut m, mut w) = (m.expect("master"), w.expect("worker"));
    assert!(m.is_sealed() && w.is_sealed());
    for (n, count, dtype) in [(1u32, 1u32, DType::F64), (3, 2, DType::F32), (64, 5, DType::F64)] {
        let form = Form {
            dtype,
            ..Form::square(n)
        };
        let len = form.in_len(count) as usize;
        let ab: Values = match dtype {
            DType::F32 => (0..len).map(|i| i as f32 * 0.5 - 3.0).collect::<Vec<_>>().into(),
            DType::F64 => (0..len).map(|i| i as f64 * 0.5 - 3.0).collect::<Vec<_>>().into(),
        };
        let msg = ToWorker::Assign {
            job: JobId(1),
            chunk: ChunkId(u64::from(n)),
            form,
            count,
        };
        m.write_frame(&msg, &ab).await.expect("sends");
        let f = w.read_frame().await.expect("valid").expect("a frame");
        assert_eq!(f.msg, msg);
        assert_eq!(f.payload, ab);
        let c = ab.slice(0..(n * n * count) as usize);
        let back = FromWorker::Results {
            job: JobId(1),
            chunk: ChunkId(u64::from(n)),
            form,
            count,
        };
        w.write_frame(&back, &c).await.expect("sends");
        let f = m.read_frame().await.expect("valid").expect("a frame");
        assert_eq!((f.msg, f.payload), (back, c));
        // Frames without payload too.
        m.send(&ToWorker::Heartbeat { seq: 7 }).await.expect("sends");
        let f = w.read_frame().await.expect("valid").expect("a frame");
        assert_eq!(f.msg, ToWorker::Heartbeat { seq: 7 });
    }
}

/// Bytes the master sends pass through a relay that records them and
/// flips bit `flip` (counted from the relay's start) if set.
struct Relay {
    seen: Arc<Mutex<Vec<u8>>>,
    flip: Arc<AtomicUsize>,
}

/// A sealed master and worker whose master→worker bytes pass the relay.
async fn relayed() -> (M<DuplexStream>, W<DuplexStream>, Relay) {
    let (a, mut a2) = tokio::io::duplex(1 << 20);
    let (mut b2, b) = tokio::io::duplex(1 << 20);
    let relay = Relay {
        seen: Arc::new(Mutex::new(Vec::new())),
        flip: Arc::new(AtomicUsize::new(usize::MAX)),
    };
    let (seen, flip) = (relay.seen.clone(), relay.flip.clone());
    tokio::spawn(async move {
        let (mut ar, mut aw) = tokio::io::split(&mut a2);
        let (mut br, mut bw) = tokio::io::split(&mut b2);
        let down = async {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = match ar.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let start = {
                    let mut s = seen.lock().expect("lock");
                    s.extend_from_slice(&buf[..n]);
                    s.len() - n
                };
                let f = flip.load(Ordering::SeqCst);
                if f != usize::MAX && f / 8 >= start && f / 8 < start + n {
                    buf[f / 8 - start] ^= 1 << (f % 8);
                }
                if bw.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
            let _ = bw.shutdown().await;
        };
        let up = async {
            let _ = tokio::io::copy(&mut br, &mut aw).await;
        };
        tokio::join!(down, up);
    });
    let (m, w) = shake(a, b, true, false).await;
    (m.expect("master"), w.expect("worker"), relay)
}

fn frame() -> (ToWorker, Values) {
    let payload: Vec<f64> = (0..2 * 4 * 4).map(|i| 1000.25 + i as f64).collect();
    let msg = ToWorker::Assign {
        job: JobId(3),
        chunk: ChunkId(4),
        form: Form::square(4),
        count: 1,
    };
    (msg, payload.into())
}

#[tokio::test]
async fn the_wire_carries_no_plaintext() {
    let (mut m, mut w, relay) = relayed().await;
    let (msg, payload) = frame();
    m.write_frame(&msg, &payload).await.expect("sends");
    let f = w.read_frame().await.expect("valid").expect("a frame");
    assert_eq!((f.msg, f.payload.clone()), (msg.clone(), payload.clone()));
    let seen = relay.seen.lock().expect("lock").clone();
    let Values::F64(values) = &payload else {
        unreachable!("float64 payload")
    };
    for v in values {
        assert!(
            !seen.windows(8).any(|x| x == v.to_le_bytes()),
            "{v} crossed in the clear"
        );
    }
    let mut head = Vec::new();
    dls_protocol::frame::encode_head(&msg, payload.as_bytes().len() as u64, &mut head).expect("encodes");
    assert!(
        !seen.windows(head.len()).any(|x| x == &head[..]),
        "the header crossed in the clear"
    );
}

#[tokio::test]
async fn any_flipped_bit_after_the_handshake_fails() {
    // Every 7th bit of one sealed frame (header record, payload, tags).
    let (msg, payload) = frame();
    let mut head = Vec::new();
    dls_protocol::frame::encode_head(&msg, payload.as_bytes().len() as u64, &mut head).expect("encodes");
    // Length, sealed header, its tag, sealed payload, its tag.
    let frame_bits = (4 + head.len() + 16 + payload.len() * 8 + 16) * 8;
    for bit in (0..frame_bits).step_by(7) {
        let (mut m, mut w, relay) = relayed().await;
        let start = relay.seen.lock().expect("lock").len();
        relay.flip.store(start * 8 + bit, Ordering::SeqCst);
        m.write_frame(&msg, &payload).await.expect("sends");
        drop(m);
        match tokio::time::timeout(T, w.read_frame()).await.expect("in time") {
            Ok(Some(f)) => panic!("bit {bit}: a changed frame was accepted: {:?}", f.msg),
            Ok(None) => panic!("bit {bit}: no error"),
            Err(_) => {}
        }
    }
}

#[tokio::test]
async fn both_sides_must_agree_to_encrypt() {
    // The worker requires it; the master does not ask.
    let (m, w) = sealed_pair(false, true).await;
    let e = m.err().expect("master refused").to_string();
    assert!(e.contains("requires encryption"), "{e}");
    assert!(w.is_err());
    // The master asks, the worker has no token.
    let (a, b) = tokio::io::duplex(1 << 16);
    let t = Token::parse(TOKEN);
    let master = async move {
        let mut m: M<_> = Connection::new(a);
        handshake::master_sealed(&mut m, t.as_ref(), 1 << 20, T, true).await
    };
    let worker = async move {
        let mut w: W<_> = Connection::new(b);
        handshake::worker(
            &mut w,
            &handshake::WorkerSide {
                token: None,
                caps: &caps(),
                frame_cap: 1 << 20,
                timeout: T,
                require_encrypt: false,
                status: None,
            },
            || {},
            || Ok(()),
        )
        .await
    };
    let (m, _) = tokio::join!(master, worker);
    let e = m.expect_err("no token on the worker").to_string();
    assert!(e.contains("without a token"), "{e}");
    // A master asked to encrypt without a token says so before connecting.
    let (a, _b) = tokio::io::duplex(1 << 16);
    let mut m: M<_> = Connection::new(a);
    let e = handshake::master_sealed(&mut m, None, 1 << 20, T, true)
        .await
        .expect_err("no token");
    assert!(e.to_string().contains("needs a token"), "{e}");
}

/// Both ends write a frame several times the stream's buffer at once: with
/// each connection split, each side reads the other's frame while its own
/// is going out (one task writing and reading in turn would wait on the
/// other forever). The halves join again into a connection that still
/// works, sealed or not.
#[tokio::test]
async fn split_halves_carry_frames_both_ways_at_once() {
    for encrypt in [false, true] {
        let (m, w) = sealed_pair(encrypt, false).await;
        let (m, w) = (m.expect("master"), w.expect("worker"));
        assert_eq!(m.is_sealed(), encrypt);
        // 64 products of 64x64: 6 MiB out, 2 MiB back, through a 1 MiB stream.
        let (form, count) = (Form::square(64), 64u32);
        let ab: Values = (0..form.in_len(count) as usize)
            .map(|i| (i % 1013) as f64)
            .collect::<Vec<_>>()
            .into();
        let c: Values = (0..(form.out_bytes(count) / 8) as usize)
            .map(|i| -((i % 977) as f64))
            .collect::<Vec<_>>()
            .into();
        let assign = ToWorker::Assign {
            job: JobId(3),
            chunk: ChunkId(1),
            form,
            count,
        };
        let results = FromWorker::Results {
            job: JobId(3),
            chunk: ChunkId(0),
            form,
            count,
        };
        let ((mut mr, mut mw), (mut wr, mut ww)) = (m.split(), w.split());
        let both = async {
            tokio::join!(
                mw.write_frame(&assign, &ab),
                ww.write_frame(&results, &c),
                mr.read_frame(),
                wr.read_frame()
            )
        };
        let (sent, returned, at_master, at_worker) = tokio::time::timeout(std::time::Duration::from_secs(20), both)
            .await
            .expect("both ways at once, without waiting on each other");
        crossed((sent, returned), (at_master, at_worker), (results, c), (assign, ab));
        let (mut m, mut w) = (Connection::unsplit(mr, mw), Connection::unsplit(wr, ww));
        assert_eq!((m.is_sealed(), w.is_sealed()), (encrypt, encrypt));
        still_talk(&mut m, &mut w, 9).await;
    }
}

/// A heartbeat and its answer cross between `m` and `w`.
async fn still_talk(m: &mut M<DuplexStream>, w: &mut W<DuplexStream>, seq: u64) {
    m.send(&ToWorker::Heartbeat { seq }).await.expect("sends");
    let f = w.read_frame().await.expect("valid").expect("a frame");
    assert_eq!(f.msg, ToWorker::Heartbeat { seq });
    w.send(&FromWorker::HeartbeatAck { seq }).await.expect("sends");
    let f = m.read_frame().await.expect("valid").expect("a frame");
    assert_eq!(f.msg, FromWorker::HeartbeatAck { seq });
}

/// What a side read: a frame, or the end, or an error.
type Read<T> = Result<Option<Frame<T>>>;

/// Both writes went through, and each side read the other's frame.
fn crossed(
    wrote: (Result<()>, Result<()>),
    read: (Read<FromWorker>, Read<ToWorker>),
    at_master: (FromWorker, Values),
    at_worker: (ToWorker, Values),
) {
    wrote.0.expect("sends");
    wrote.1.expect("returns");
    let m = read.0.expect("valid").expect("a frame");
    let w = read.1.expect("valid").expect("a frame");
    assert_eq!((m.msg, m.payload), at_master);
    assert_eq!((w.msg, w.payload), at_worker);
}

/// A connection lent out in halves (`lend`) writes a large frame while it
/// reads one that the peer writes at the same time (one after the other,
/// through a 1 MiB stream, each would wait for the other forever), and is
/// itself again after, sealed or not, also when the halves were dropped in
/// the middle of a read.
#[tokio::test]
async fn a_lent_connection_reads_and_writes_at_once_and_comes_back() {
    for encrypt in [false, true] {
        let (m, w) = sealed_pair(encrypt, false).await;
        let (mut m, w) = (m.expect("master"), w.expect("worker"));
        // 2.4 MB each way.
        let assign = ToWorker::Echo { len: 300_000 };
        let ab: Values = (0..300_000).map(|i| (i % 1013) as f64).collect::<Vec<_>>().into();
        let results = FromWorker::PullData { len: 300_000 };
        let c: Values = (0..300_000).map(|i| -((i % 977) as f64)).collect::<Vec<_>>().into();
        let (mut wr, mut ww) = w.split();
        let both = async {
            let mut lent = m.lend();
            let (r, w) = (&mut lent.reading, &mut lent.writing);
            tokio::join!(
                w.write_frame(&assign, &ab),
                r.read_frame(),
                ww.write_frame(&results, &c),
                wr.read_frame()
            )
        };
        let (sent, at_master, returned, at_worker) = tokio::time::timeout(std::time::Duration::from_secs(20), both)
            .await
            .expect("both ways at once, without waiting on each other");
        crossed((sent, returned), (at_master, at_worker), (results, c), (assign, ab));
        // Dropped while it waits for a frame that has not come yet: the
        // frame that comes later is read by the connection itself.
        let waiting = async {
            let mut lent = m.lend();
            lent.reading.read_frame().await.is_ok()
        };
        assert!(tokio::time::timeout(std::time::Duration::from_millis(50), waiting)
            .await
            .is_err());
        let mut w = Connection::unsplit(wr, ww);
        assert_eq!(m.is_sealed(), encrypt);
        still_talk(&mut m, &mut w, 4).await;
    }
}
