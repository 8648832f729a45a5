//! Pieces of one large product on a real daemon: panels along k added up
//! into the piece's C, held for the grant, returned once; the memory
//! limit counting a piece's C once; a cancel letting go of a piece half
//! added.

mod common;
use common::*;

use dls_protocol::{ChunkId, DType, ErrorCode, Form, FromWorker, JobId, Shape, ToWorker, Values};
use dls_worker::kernel;

/// Random A (h×k) and B (k×w) in [-1, 1), as float64.
fn inputs(h: usize, k: usize, w: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut a = vec![0.0; h * k];
    let mut b = vec![0.0; k * w];
    kernel::fill_random(&mut a, seed);
    kernel::fill_random(&mut b, seed + 1);
    (a, b)
}

/// The panel of A's columns and B's rows `k0..k1`, in `dtype`.
fn panel(a: &[f64], b: &[f64], h: usize, k: usize, w: usize, ks: std::ops::Range<usize>, dtype: DType) -> Values {
    let mut v: Vec<f64> = Vec::with_capacity((h + w) * ks.len());
    for r in 0..h {
        v.extend_from_slice(&a[r * k + ks.start..r * k + ks.end]);
    }
    v.extend_from_slice(&b[ks.start * w..ks.end * w]);
    match dtype {
        DType::F64 => Values::F64(v),
        DType::F32 => Values::F32(v.iter().map(|&x| x as f32).collect()),
    }
}

fn form(h: usize, kp: usize, w: usize, dtype: DType) -> Form {
    Form {
        shape: Shape {
            n: h as u32,
            k: kp as u32,
            m: w as u32,
        },
        dtype,
        shared_b: false,
    }
}

#[tokio::test]
async fn panels_add_up_to_the_piece_which_returns_once_granted() {
    let d = Daemon::start(&[], None);
    let mut c = master(&d.addr, None).await.expect("handshake");
    let (h, k, w) = (13, 50, 7);
    let (a, b) = inputs(h, k, w, 77);
    let want = kernel::naive_dims(&a, &b, kernel::Dims { n: h, k, m: w });
    for (job, dtype) in [(1u64, DType::F64), (2, DType::F32)] {
        let (job, piece) = (JobId(job), ChunkId(5));
        let cuts = [0..20, 20..21, 21..50];
        for (j, ks) in cuts.iter().enumerate() {
            let msg = ToWorker::Panel {
                job,
                piece,
                form: form(h, ks.len(), w, dtype),
                depth: k as u32,
                last: j == cuts.len() - 1,
            };
            c.write_frame(&msg, &panel(&a, &b, h, k, w, ks.clone(), dtype))
                .await
                .expect("sends a panel");
            assert_eq!(next(&mut c).await, FromWorker::Received { job, chunk: piece });
            assert!(matches!(next(&mut c).await, FromWorker::Ready { chunk, .. } if chunk == piece));
        }
        c.send(&ToWorker::Grant { job, chunk: piece }).await.expect("grants");
        let f = tokio::time::timeout(T, c.read_frame())
            .await
            .expect("in time")
            .expect("valid")
            .expect("a frame");
        match f.msg {
            FromWorker::Results { form: got, count, .. } => {
                assert_eq!((got, count), (form(h, k, w, dtype), 1));
            }
            other => panic!("expected results, got {other:?}"),
        }
        assert_eq!((f.payload.len(), f.payload.dtype()), (h * w, dtype));
        // Values in [-1, 1): each sum of k products is within (k + 2)·ε·k.
        let tol = (k as f64 + 2.0) * k as f64 * dtype.epsilon();
        for (i, y) in want.iter().enumerate() {
            assert!(
                (f.payload.get(i) - y).abs() <= tol,
                "{dtype} [{i}]: {} vs {y}",
                f.payload.get(i)
            );
        }
    }
}

#[tokio::test]
async fn a_piece_counts_its_c_once_against_the_memory_limit_and_a_cancel_lets_it_go() {
    // 20×20 float64 pieces: C 3,200 bytes, a panel 2 deep 640 bytes.
    let d = Daemon::start(&["--memory-limit", "5000"], None);
    let mut c = master(&d.addr, None).await.expect("handshake");
    let (h, k, w) = (20, 8, 20);
    let (a, b) = inputs(h, k, w, 5);
    let f = form(h, 2, w, DType::F64);
    let send = |job: u64, piece: u64, ks: std::ops::Range<usize>, last: bool| {
        (
            ToWorker::Panel {
                job: JobId(job),
                piece: ChunkId(piece),
                form: f,
                depth: k as u32,
                last,
            },
            panel(&a, &b, h, k, w, ks, DType::F64),
        )
    };
    // Three panels of one piece fit one after another: its C is held once.
    for (j, ks) in [0..2, 2..4, 4..6].into_iter().enumerate() {
        let (msg, p) = send(1, 1, ks, false);
        c.write_frame(&msg, &p).await.expect("sends");
        assert!(matches!(next(&mut c).await, FromWorker::Received { .. }), "panel {j}");
        assert!(matches!(next(&mut c).await, FromWorker::Ready { .. }), "panel {j}");
    }
    // A second piece needs another C: over the limit, refused by name.
    let (msg, p) = send(1, 2, 0..2, false);
    c.write_frame(&msg, &p).await.expect("sends");
    let m = expect_error(&mut c, ErrorCode::MemoryLimit).await;
    assert!(m.contains("panel of piece 2"), "{m}");
    // The refusal ended that session; in the next, a cancel frees the C.
    let mut c = next_master(&d.addr, None).await;
    let (msg, p) = send(3, 1, 0..2, false);
    c.write_frame(&msg, &p).await.expect("sends");
    assert!(matches!(next(&mut c).await, FromWorker::Received { .. }));
    assert!(matches!(next(&mut c).await, FromWorker::Ready { .. }));
    c.send(&ToWorker::Cancel { job: JobId(3) }).await.expect("cancels");
    let (msg, p) = send(4, 1, 0..2, true);
    c.write_frame(&msg, &p).await.expect("sends");
    assert!(matches!(next(&mut c).await, FromWorker::Received { .. }));
    assert!(matches!(next(&mut c).await, FromWorker::Ready { .. }));
}
