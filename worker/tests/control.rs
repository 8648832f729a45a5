//! The control line: a second connection carrying a session's grants, so
//! that a grant does not wait behind a chunk being read on the session's
//! own connection (where TCP delivers it only after every byte written
//! before it).

mod common;
use common::*;

use dls_protocol::{handshake, ChunkId, ErrorCode, Form, FromWorker, JobId, ToWorker, Values};
use dls_worker::kernel;
use std::time::{Duration, Instant};

/// `count` random products of `form` and what a naive product makes of them.
fn chunk(form: &Form, count: usize, seed: u64) -> (Values, Vec<f64>) {
    let (inputs, _) = kernel::random_inputs(form, count, seed).expect("memory");
    let d = kernel::Dims::of(form);
    let x = inputs.to_f64(0..inputs.len()).into_owned();
    let (a_len, b_len) = (d.n * d.k, d.k * d.m);
    let mut c = Vec::new();
    for i in 0..count {
        let b = &x[count * a_len + i * b_len..count * a_len + (i + 1) * b_len];
        c.extend(kernel::naive_dims(&x[i * a_len..(i + 1) * a_len], b, d));
    }
    (inputs, c)
}

fn assign(job: JobId, chunk: u64, form: Form, count: u32) -> ToWorker {
    ToWorker::Assign {
        job,
        chunk: ChunkId(chunk),
        form,
        count,
    }
}

/// A session with chunk 1 (two products of 64²) computed and waiting for
/// its grant, on a daemon whose link reads 4 MB/s; its welcome's session.
async fn session_with_results_waiting(d: &Daemon) -> (Master, u64, Vec<f64>) {
    let mut c = raw(&d.addr).await;
    let caps = handshake::master(&mut c, None, 1 << 30, T).await.expect("handshake");
    let form = Form::square(64);
    let (ab, want) = chunk(&form, 2, 1);
    c.write_frame(&assign(JobId(1), 1, form, 2), &ab).await.expect("sends");
    assert_eq!(
        next(&mut c).await,
        FromWorker::Received {
            job: JobId(1),
            chunk: ChunkId(1)
        }
    );
    assert!(matches!(next(&mut c).await, FromWorker::Ready { .. }));
    (c, caps.session, want)
}

/// Chunk 2 (8 products of 128², 2.1 MB: half a second at 4 MB/s) written
/// on `c`'s own connection by a task, the grant of chunk 1 right after it
/// starts (on the control line if `line`, else behind the chunk); the
/// frames that come back on either, in order, until chunk 2 is received,
/// each with the seconds since the grant.
async fn grant_during_a_long_chunk(c: Master, line: Option<&mut Master>) -> Vec<(FromWorker, Values, f64)> {
    let (mut reading, mut writing) = c.split();
    let form = Form::square(128);
    let (ab2, _) = chunk(&form, 8, 2);
    let grant = ToWorker::Grant {
        job: JobId(1),
        chunk: ChunkId(1),
    };
    let writer = tokio::spawn(async move {
        writing
            .write_frame(&assign(JobId(1), 2, form, 8), &ab2)
            .await
            .expect("sends chunk 2");
        writing
    });
    // The chunk's first bytes are on their way.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let granted = Instant::now();
    let mut line = line;
    let mut writing = match line.as_deref_mut() {
        Some(l) => {
            l.send(&grant).await.expect("grants on the control line");
            None
        }
        None => {
            let mut w = writer.await.expect("the chunk was written");
            w.send(&grant).await.expect("grants behind the chunk");
            Some(w)
        }
    };
    let mut frames = Vec::new();
    loop {
        let read = async {
            match line.as_deref_mut() {
                Some(l) => tokio::select! {
                    f = reading.read_frame() => f,
                    f = l.read_frame() => f,
                },
                None => reading.read_frame().await,
            }
        };
        let f = tokio::time::timeout(T, read)
            .await
            .expect("in time")
            .expect("valid")
            .expect("a frame");
        let chunk2 = f.msg
            == FromWorker::Received {
                job: JobId(1),
                chunk: ChunkId(2),
            };
        frames.push((f.msg, f.payload, granted.elapsed().as_secs_f64()));
        if chunk2 {
            break;
        }
    }
    writing.take();
    frames
}

fn results_of_chunk_1(frames: &[(FromWorker, Values, f64)]) -> Option<usize> {
    frames
        .iter()
        .position(|(m, _, _)| matches!(m, FromWorker::Results { chunk, .. } if *chunk == ChunkId(1)))
}

#[tokio::test]
async fn a_grant_on_the_control_line_overtakes_the_chunk_being_read() {
    let d = Daemon::start(&["--link-rate", "4"], None);
    // On the session's own connection the grant arrives after the chunk:
    // chunk 1's results come after chunk 2 is received.
    let (c, _, _) = session_with_results_waiting(&d).await;
    let frames = grant_during_a_long_chunk(c, None).await;
    assert_eq!(
        results_of_chunk_1(&frames),
        None,
        "{:?}",
        frames.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    drop(frames);
    // On the control line it does not wait: the results come first, within
    // a fraction of the chunk's half second, and are right.
    let d = Daemon::start(&["--link-rate", "4"], None);
    let (c, session, want) = session_with_results_waiting(&d).await;
    assert_ne!(session, 0, "the welcome names the session");
    let mut line = raw(&d.addr).await;
    handshake::master_control(&mut line, None, T, false, session)
        .await
        .expect("the control line opens");
    let frames = grant_during_a_long_chunk(c, Some(&mut line)).await;
    let at = results_of_chunk_1(&frames).expect("chunk 1's results came before chunk 2 was received");
    let (results, received) = (frames[at].2, frames.last().expect("frames").2);
    assert!(
        results < 0.5 * received,
        "results {results:.3} s after the grant, chunk 2 in {received:.3} s"
    );
    let got = &frames[at].1;
    assert_eq!(got.len(), want.len());
    for (i, y) in want.iter().enumerate() {
        assert!((got.get(i) - y).abs() <= 1e-12 * 66.0, "{} vs {y}", got.get(i));
    }
}

#[tokio::test]
async fn a_control_line_names_a_live_session_and_carries_grants_only() {
    let d = Daemon::start(&[], None);
    // No session of that number: refused, by name.
    let mut line = raw(&d.addr).await;
    let e = handshake::master_control(&mut line, None, T, false, 12345);
    match e.await {
        Ok(_) => {
            let m = expect_error(&mut line, ErrorCode::UnexpectedMessage).await;
            assert!(m.contains("no session 12345"), "{m}");
        }
        Err(e) => panic!("the handshake itself should pass, then the line be refused: {e}"),
    }
    // A live session's line refuses anything but a grant.
    let mut c = raw(&d.addr).await;
    let caps = handshake::master(&mut c, None, 1 << 30, T).await.expect("handshake");
    let mut line = raw(&d.addr).await;
    handshake::master_control(&mut line, None, T, false, caps.session)
        .await
        .expect("the control line opens");
    line.send(&ToWorker::Heartbeat { seq: 1 }).await.expect("sends");
    let m = expect_error(&mut line, ErrorCode::UnexpectedMessage).await;
    assert!(m.contains("grants only"), "{m}");
    // The session itself goes on.
    c.send(&ToWorker::Heartbeat { seq: 2 }).await.expect("sends");
    assert!(matches!(next(&mut c).await, FromWorker::HeartbeatAck { .. }));
}
