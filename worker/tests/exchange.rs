//! Two real daemons exchanging one product's panels: the master sends A's
//! rows to one, which passes them on to the other on a connection of its
//! own; each puts its panels together, adds them up band by band and
//! returns each band's C once granted, against a naive product. A peer's
//! connection naming no session, or carrying anything but parts, is
//! refused; parts for a peer that cannot be reached come back as
//! `PeerFailed`.

mod common;
use common::*;

use dls_protocol::{
    handshake, ChunkId, DType, ErrorCode, FromWorker, JobId, PeerAddr, SharePart, Span, ToWorker, Values,
};
use dls_worker::kernel;
use std::collections::HashMap;

const N: u32 = 6;
const K: u32 = 10;
const M: u32 = 8;
const STEPS: [u32; 2] = [4, 6];

fn span(start: u32, len: u32) -> Span {
    Span { start, len }
}

/// Rows `r` of A (n × k, row-major) over k `k0..k0 + d`.
fn a_part(a: &[f64], r: Span, k0: u32, d: u32) -> Values {
    Values::F64(
        (r.start..r.end())
            .flat_map(|i| (k0..k0 + d).map(move |j| a[(i * K + j) as usize]))
            .collect(),
    )
}

/// Columns `c` of B (k × m) over k `k0..k0 + d`: d rows of the span's width.
fn b_part(b: &[f64], c: Span, k0: u32, d: u32) -> Values {
    Values::F64(
        (k0..k0 + d)
            .flat_map(|i| (c.start..c.end()).map(move |j| b[(i * M + j) as usize]))
            .collect(),
    )
}

fn share(stage: u32, part: SharePart, values: &Values, forward: Vec<u32>) -> (ToWorker, Values) {
    let msg = ToWorker::Share {
        job: JobId(1),
        stage,
        part,
        dtype: DType::F64,
        len: values.len() as u64,
        forward,
    };
    (msg, values.clone())
}

/// Worker `x` holds columns 0..5 of C in bands of 3 and 2 (pieces 10 and
/// 11), worker `y` columns 5..8 in bands of 2 and 1 (pieces 20, 21); both
/// hold every row. The master sends A's rows to `x` only, asking it to
/// pass them on to `y`.
#[tokio::test]
async fn panels_passed_on_add_up_to_c_band_by_band() {
    let (dx, dy) = (Daemon::start(&[], None), Daemon::start(&[], None));
    let mut x = raw(&dx.addr).await;
    let cx = handshake::master(&mut x, None, 1 << 30, T).await.expect("handshake");
    let mut y = raw(&dy.addr).await;
    let cy = handshake::master(&mut y, None, 1 << 30, T).await.expect("handshake");
    let mut a = vec![0.0; (N * K) as usize];
    let mut b = vec![0.0; (K * M) as usize];
    kernel::fill_random(&mut a, 5);
    kernel::fill_random(&mut b, 6);
    let want = kernel::naive_dims(
        &a,
        &b,
        kernel::Dims {
            n: N as usize,
            k: K as usize,
            m: M as usize,
        },
    );
    let exchange = |cols: Span, bands: Vec<(ChunkId, u32)>, peer: PeerAddr| ToWorker::Exchange {
        job: JobId(1),
        dtype: DType::F64,
        rows: span(0, N),
        cols,
        bands,
        steps: STEPS.to_vec(),
        peers: vec![peer],
    };
    let to_y = PeerAddr {
        addr: dy.addr.clone(),
        session: cy.session,
    };
    let to_x = PeerAddr {
        addr: dx.addr.clone(),
        session: cx.session,
    };
    x.send(&exchange(span(0, 5), vec![(ChunkId(10), 3), (ChunkId(11), 2)], to_y))
        .await
        .expect("sends");
    y.send(&exchange(span(5, 3), vec![(ChunkId(20), 2), (ChunkId(21), 1)], to_x))
        .await
        .expect("sends");
    let bands_x = [span(0, 3), span(3, 2)];
    let bands_y = [span(5, 2), span(7, 1)];
    for band in 0..2u32 {
        let mut k0 = 0;
        for (step, &d) in STEPS.iter().enumerate() {
            let stage = band * 2 + step as u32;
            if band == 0 {
                let (m, v) = share(
                    stage,
                    SharePart::Rows(span(0, N)),
                    &a_part(&a, span(0, N), k0, d),
                    vec![0],
                );
                x.write_frame(&m, &v).await.expect("sends");
            }
            let (m, v) = share(
                stage,
                SharePart::Cols(bands_x[band as usize]),
                &b_part(&b, bands_x[band as usize], k0, d),
                vec![],
            );
            x.write_frame(&m, &v).await.expect("sends");
            let (m, v) = share(
                stage,
                SharePart::Cols(bands_y[band as usize]),
                &b_part(&b, bands_y[band as usize], k0, d),
                vec![],
            );
            y.write_frame(&m, &v).await.expect("sends");
            k0 += d;
        }
    }
    // Each worker: a Received and a Ready per stage; a grant after each
    // band's last Ready brings that band's C.
    let mut c = vec![f64::NAN; (N * M) as usize];
    for (conn, bands) in [
        (&mut x, [(10u64, span(0, 3)), (11, span(3, 2))]),
        (&mut y, [(20, span(5, 2)), (21, span(7, 1))]),
    ] {
        let mut ready: HashMap<u64, usize> = HashMap::new();
        let mut received = 0;
        let mut returned = 0;
        while returned < 2 {
            let f = tokio::time::timeout(T, conn.read_frame())
                .await
                .expect("in time")
                .expect("valid")
                .expect("a frame");
            match f.msg {
                FromWorker::Received { .. } => received += 1,
                FromWorker::Ready { chunk, .. } => {
                    let n = ready.entry(chunk.0).or_default();
                    *n += 1;
                    if *n == STEPS.len() {
                        conn.send(&ToWorker::Grant { job: JobId(1), chunk })
                            .await
                            .expect("grants");
                    }
                }
                FromWorker::Results { chunk, form, .. } => {
                    let cols = bands.iter().find(|b| b.0 == chunk.0).expect("a band of this worker").1;
                    assert_eq!((form.shape.n, form.shape.k, form.shape.m), (N, K, cols.len));
                    let got = f.payload.to_f64(0..f.payload.len()).into_owned();
                    for i in 0..N {
                        for j in 0..cols.len {
                            c[(i * M + cols.start + j) as usize] = got[(i * cols.len + j) as usize];
                        }
                    }
                    returned += 1;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(received, 4, "a panel whole per stage");
    }
    for (i, (&got, &w)) in c.iter().zip(&want).enumerate() {
        assert!((got - w).abs() <= 1e-12 * (1.0 + w.abs()), "C[{i}] = {got}, want {w}");
    }
}

#[tokio::test]
async fn a_peer_line_takes_parts_of_a_live_session_only() {
    let d = Daemon::start(&[], None);
    let mut m = master(&d.addr, None).await.expect("handshake");
    m.send(&ToWorker::Heartbeat { seq: 1 }).await.expect("sends");
    assert_eq!(next(&mut m).await, FromWorker::HeartbeatAck { seq: 1 });
    // No session by that number.
    let mut p = raw(&d.addr).await;
    handshake::peer(&mut p, None, 1 << 20, T, false, 12345)
        .await
        .expect("handshake");
    let msg = expect_error(&mut p, ErrorCode::UnexpectedMessage).await;
    assert!(msg.contains("no session 12345"), "{msg}");
}

#[tokio::test]
async fn parts_for_a_peer_out_of_reach_come_back_as_peer_failed() {
    let d = Daemon::start(&[], None);
    let mut m = raw(&d.addr).await;
    handshake::master(&mut m, None, 1 << 30, T).await.expect("handshake");
    // A port nobody listens on: bind one, then let it go.
    let gone = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("binds")
        .local_addr()
        .expect("an address");
    m.send(&ToWorker::Exchange {
        job: JobId(1),
        dtype: DType::F64,
        rows: span(0, 2),
        cols: span(0, 2),
        bands: vec![(ChunkId(1), 2)],
        steps: vec![2],
        peers: vec![PeerAddr {
            addr: gone.to_string(),
            session: 7,
        }],
    })
    .await
    .expect("sends");
    let rows = Values::F64(vec![1.0; 4]);
    let (msg, v) = share(0, SharePart::Rows(span(0, 2)), &rows, vec![0]);
    m.write_frame(&msg, &v).await.expect("sends");
    match next(&mut m).await {
        FromWorker::PeerFailed { job, peer, message } => {
            assert_eq!((job, peer), (JobId(1), 0));
            assert!(message.contains(&gone.to_string()), "{message}");
        }
        other => panic!("expected PeerFailed, got {other:?}"),
    }
}
