//! The handshake over an in-memory stream: tokens, versions, timeouts.

mod common;
use common::{caps, T};
use dls_protocol::handshake;
use dls_protocol::*;
use std::time::Duration;

async fn run(
    master_token: Option<&str>,
    worker_token: Option<&str>,
) -> (Result<Capabilities>, Result<handshake::Shaken>) {
    let (a, b) = tokio::io::duplex(1 << 16);
    let mt = master_token.and_then(Token::parse);
    let wt = worker_token.and_then(Token::parse);
    let mut w: Connection<_, ToWorker, FromWorker> = Connection::new(b);
    let c = caps();
    // The master's end closes as soon as its side is done, as a real master's would.
    let master = async move {
        let mut m: Connection<_, FromWorker, ToWorker> = Connection::new(a);
        handshake::master(&mut m, mt.as_ref(), 1 << 20, T).await
    };
    let ws = common::worker_side(wt.as_ref(), &c);
    tokio::join!(master, handshake::worker(&mut w, &ws, || {}, || Ok(())))
}

#[tokio::test]
async fn same_token_succeeds_both_ways() {
    let (m, w) = run(Some("s3cret\n"), Some("s3cret")).await;
    assert_eq!(m.expect("master side"), caps());
    w.expect("worker side");
}

#[tokio::test]
async fn no_token_on_either_side_is_allowed() {
    let (m, w) = run(None, None).await;
    m.expect("master side");
    w.expect("worker side");
}

#[tokio::test]
async fn wrong_token_is_refused_on_both_sides() {
    let (m, w) = run(Some("alpha"), Some("beta")).await;
    // The master checks the worker's proof first and gives up.
    let m = m.expect_err("master refuses").to_string();
    assert!(m.contains("different tokens"), "{m}");
    assert!(w.is_err());
}

#[tokio::test]
async fn master_without_token_is_unauthorized() {
    let (m, w) = run(None, Some("beta")).await;
    let w = w.expect_err("worker refuses").to_string();
    assert!(w.contains("unauthorized"), "{w}");
    match m.expect_err("master is told") {
        Error::Remote { code, message } => {
            assert_eq!(code, ErrorCode::Unauthorized);
            assert!(message.contains("token"));
        }
        other => panic!("expected a remote error, got {other:?}"),
    }
}

#[tokio::test]
async fn worker_without_token_is_refused_by_a_master_with_one() {
    let (m, _) = run(Some("alpha"), None).await;
    assert!(m.expect_err("refused").to_string().contains("without a token"));
}

#[tokio::test]
async fn version_mismatch_names_both_versions() {
    let (a, b) = tokio::io::duplex(1 << 16);
    let mut m: Connection<_, FromWorker, ToWorker> = Connection::new(a);
    let mut w: Connection<_, ToWorker, FromWorker> = Connection::new(b);
    let c = caps();
    let master = async {
        m.send(&ToWorker::Hello {
            version: PROTOCOL_VERSION + 7,
            nonce: [0; 32],
        })
        .await
        .expect("sends");
        m.read_frame().await.expect("reads").expect("a frame").msg
    };
    let ws = common::worker_side(None, &c);
    let (reply, res) = tokio::join!(master, handshake::worker(&mut w, &ws, || {}, || Ok(())));
    assert!(res.is_err());
    match reply {
        FromWorker::Error { code, message } => {
            assert_eq!(code, ErrorCode::VersionMismatch);
            assert!(message.contains(&PROTOCOL_VERSION.to_string()));
            assert!(message.contains(&(PROTOCOL_VERSION + 7).to_string()));
        }
        other => panic!("expected an error frame, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_silent_peer_times_out() {
    let (_a, b) = tokio::io::duplex(1 << 16);
    let mut w: Connection<_, ToWorker, FromWorker> = Connection::new(b);
    let c = caps();
    let res = handshake::worker(
        &mut w,
        &handshake::WorkerSide {
            timeout: Duration::from_secs(3),
            ..common::worker_side(None, &c)
        },
        || {},
        || Ok(()),
    )
    .await;
    assert!(matches!(res, Err(Error::Timeout(..))), "{res:?}");
}

#[tokio::test]
async fn read_frame_is_cancel_safe_and_reassembles_payloads() {
    use tokio::io::AsyncWriteExt;
    let (mut a, b) = tokio::io::duplex(64);
    let mut w: Connection<_, ToWorker, FromWorker> = Connection::new(b);
    w.set_max_frame(1 << 20);
    // Two float32 products of a 3×2 A and a 2×4 B: 2·(6 + 8) values.
    let payload: Vec<f32> = (0..2 * (6 + 8)).map(|i| i as f32 * 0.5).collect();
    let form = dls_protocol::Form {
        shape: dls_protocol::Shape { n: 3, k: 2, m: 4 },
        dtype: dls_protocol::DType::F32,
        shared_b: false,
    };
    let frame = Frame::with_payload(
        ToWorker::Assign {
            job: JobId(3),
            chunk: ChunkId(9),
            form,
            count: 2,
        },
        payload,
    );
    let mut bytes = bytes::BytesMut::new();
    frame::encode(&frame, &mut bytes).expect("encodes");
    let writer = tokio::spawn(async move {
        for piece in bytes.chunks(7) {
            a.write_all(piece).await.expect("writes");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        a
    });
    // Poll with a short timeout again and again: cancelled reads lose nothing.
    let got = loop {
        if let Ok(r) = tokio::time::timeout(Duration::from_micros(300), w.read_frame()).await {
            break r.expect("valid").expect("a frame");
        }
    };
    assert_eq!(got, frame);
    drop(writer.await.expect("writer"));
    assert!(w.read_frame().await.expect("clean close").is_none());
}

#[tokio::test]
async fn a_refused_admission_reaches_the_master() {
    let (a, b) = tokio::io::duplex(1 << 16);
    let mut w: Connection<_, ToWorker, FromWorker> = Connection::new(b);
    let c = caps();
    let master = async move {
        let mut m: Connection<_, FromWorker, ToWorker> = Connection::new(a);
        handshake::master(&mut m, None, 1 << 20, T).await
    };
    let busy = || {
        Err(Error::Refused {
            code: ErrorCode::Busy,
            message: "busy".into(),
        })
    };
    let ws = common::worker_side(None, &c);
    let (m, w) = tokio::join!(master, handshake::worker(&mut w, &ws, || {}, busy));
    assert!(w.is_err());
    assert!(
        matches!(
            m,
            Err(Error::Remote {
                code: ErrorCode::Busy,
                ..
            })
        ),
        "{m:?}"
    );
}

#[tokio::test]
async fn payload_in_parts_arrives_whole() {
    let (a, b) = tokio::io::duplex(97);
    let mut m: Connection<_, FromWorker, ToWorker> = Connection::new(a);
    let mut w: Connection<_, ToWorker, FromWorker> = Connection::new(b);
    w.set_max_frame(1 << 20);
    let a_part: Vec<f64> = (0..18).map(f64::from).collect();
    let b_part: Vec<f64> = (100..118).map(f64::from).collect();
    let msg = ToWorker::Assign {
        job: JobId(1),
        chunk: ChunkId(2),
        form: dls_protocol::Form::square(3),
        count: 2,
    };
    let (ab, bb) = (
        dls_protocol::values::le_bytes(&a_part),
        dls_protocol::values::le_bytes(&b_part),
    );
    let parts: [&[u8]; 3] = [&ab, &[], &bb];
    let (sent, got) = tokio::join!(m.write_frame_parts(&msg, &parts), w.read_frame());
    sent.expect("sends");
    let got = got.expect("valid").expect("a frame");
    assert_eq!(got.msg, msg);
    assert_eq!(got.payload, dls_protocol::Values::F64([a_part, b_part].concat()));
    // A payload that disagrees with the message is refused before writing.
    assert!(m.write_frame_parts(&msg, &[&[0u8; 8]]).await.is_err());
}
