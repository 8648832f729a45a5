//! Framing against its specification: round trips of every message,
//! partial input, garbage, and limits.

use bytes::BytesMut;
use dls_protocol::frame::{self, HANDSHAKE_MAX_FRAME};
use dls_protocol::*;
use proptest::prelude::*;

const BIG: u64 = 1 << 30;

fn caps() -> impl Strategy<Value = Capabilities> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        "[a-z0-9 .]{0,20}",
        any::<bool>(),
    )
        .prop_map(|(cores, threads, memory_limit, kernel, emulated)| Capabilities {
            cores,
            threads,
            memory_limit,
            kernel,
            emulated,
        })
}

fn small_dims() -> impl Strategy<Value = (u32, u32)> {
    (0u32..6, 0u32..4)
}

fn to_worker() -> impl Strategy<Value = Frame<ToWorker>> {
    let job = any::<u64>().prop_map(JobId);
    let chunk = any::<u64>().prop_map(ChunkId);
    prop_oneof![
        (any::<u32>(), any::<[u8; 32]>()).prop_map(|(version, nonce)| Frame::new(ToWorker::Hello { version, nonce })),
        (
            proptest::option::of(any::<[u8; 32]>()),
            any::<u64>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(proof, max_frame, encrypt, status)| Frame::new(ToWorker::Auth {
                proof,
                max_frame,
                encrypt,
                status
            })),
        (job.clone(), chunk.clone(), small_dims()).prop_flat_map(|(job, chunk, (n, k))| {
            proptest::collection::vec(any::<f64>(), (2 * n * n * k) as usize)
                .prop_map(move |p| Frame::with_payload(ToWorker::Assign { job, chunk, n, k }, p))
        }),
        (job.clone(), chunk).prop_map(|(job, chunk)| Frame::new(ToWorker::Grant { job, chunk })),
        job.prop_map(|job| Frame::new(ToWorker::Cancel { job })),
        any::<u64>().prop_map(|seq| Frame::new(ToWorker::Heartbeat { seq })),
        proptest::collection::vec(any::<f64>(), 0..50)
            .prop_map(|p| Frame::with_payload(ToWorker::Echo { len: p.len() as u64 }, p)),
        any::<u64>().prop_map(|len| Frame::new(ToWorker::Pull { len })),
        (any::<u32>(), any::<u32>()).prop_map(|(n, k)| Frame::new(ToWorker::ComputeProbe { n, k })),
        Just(Frame::new(ToWorker::Bye)),
    ]
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    prop_oneof![
        Just(ErrorCode::VersionMismatch),
        Just(ErrorCode::Unauthorized),
        Just(ErrorCode::Busy),
        Just(ErrorCode::Malformed),
        Just(ErrorCode::FrameTooLarge),
        Just(ErrorCode::PayloadMismatch),
        Just(ErrorCode::MemoryLimit),
        Just(ErrorCode::UnexpectedMessage),
        Just(ErrorCode::Internal),
    ]
}

fn from_worker() -> impl Strategy<Value = Frame<FromWorker>> {
    let job = any::<u64>().prop_map(JobId);
    let chunk = any::<u64>().prop_map(ChunkId);
    prop_oneof![
        (any::<u32>(), any::<[u8; 32]>(), proptest::option::of(any::<[u8; 32]>()))
            .prop_map(|(version, nonce, proof)| Frame::new(FromWorker::Challenge { version, nonce, proof })),
        caps().prop_map(|c| Frame::new(FromWorker::Welcome(c))),
        (job.clone(), chunk.clone()).prop_map(|(job, chunk)| Frame::new(FromWorker::Received { job, chunk })),
        (job.clone(), chunk.clone(), any::<f64>()).prop_map(|(job, chunk, compute_secs)| Frame::new(
            FromWorker::Ready {
                job,
                chunk,
                compute_secs
            }
        )),
        (job, chunk, small_dims()).prop_flat_map(|(job, chunk, (n, k))| {
            proptest::collection::vec(any::<f64>(), (n * n * k) as usize)
                .prop_map(move |p| Frame::with_payload(FromWorker::Results { job, chunk, n, k }, p))
        }),
        any::<u64>().prop_map(|len| Frame::new(FromWorker::EchoAck { len })),
        proptest::collection::vec(any::<f64>(), 0..50)
            .prop_map(|p| Frame::with_payload(FromWorker::PullData { len: p.len() as u64 }, p)),
        (any::<u32>(), any::<u32>(), any::<f64>()).prop_map(|(n, k, secs)| Frame::new(FromWorker::ComputeDone {
            n,
            k,
            secs
        })),
        any::<u64>().prop_map(|seq| Frame::new(FromWorker::HeartbeatAck { seq })),
        (error_code(), ".{0,40}").prop_map(|(code, message)| Frame::new(FromWorker::Error { code, message })),
        Just(Frame::new(FromWorker::Bye)),
    ]
}

/// Frames compare bit for bit (NaN payloads included).
fn same<M: PartialEq + std::fmt::Debug>(a: &Frame<M>, b: &Frame<M>) {
    assert_eq!(a.msg, b.msg);
    let bits = |p: &[f64]| p.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.payload), bits(&b.payload));
}

fn roundtrip<M>(f: &Frame<M>)
where
    M: serde::Serialize + serde::de::DeserializeOwned + Payload + PartialEq + std::fmt::Debug,
{
    let mut buf = BytesMut::new();
    frame::encode(f, &mut buf).expect("encodes");
    let whole = buf.clone();
    // Every strict prefix is "not enough bytes yet", never an error.
    for cut in 0..whole.len() {
        let mut part = BytesMut::from(&whole[..cut]);
        assert!(
            matches!(frame::decode::<M>(&mut part, BIG), Ok(None)),
            "prefix of {cut} bytes"
        );
        assert_eq!(part.len(), cut, "nothing consumed from a prefix");
    }
    // Two frames back to back decode one after the other.
    buf.extend_from_slice(&whole);
    let a = frame::decode::<M>(&mut buf, BIG).expect("valid").expect("whole");
    let b = frame::decode::<M>(&mut buf, BIG).expect("valid").expect("whole");
    same(&a, f);
    same(&b, f);
    assert!(buf.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn to_worker_roundtrips(f in to_worker()) {
        roundtrip(&f);
    }

    #[test]
    fn from_worker_roundtrips(f in from_worker()) {
        roundtrip(&f);
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut buf = BytesMut::from(&bytes[..]);
        let _ = frame::decode::<ToWorker>(&mut buf, HANDSHAKE_MAX_FRAME);
        let mut buf = BytesMut::from(&bytes[..]);
        let _ = frame::decode::<FromWorker>(&mut buf, HANDSHAKE_MAX_FRAME);
    }
}

#[test]
fn absurd_length_is_rejected_before_allocating() {
    let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xff][..]);
    match frame::decode::<ToWorker>(&mut buf, HANDSHAKE_MAX_FRAME) {
        Err(Error::FrameTooLarge { len, max }) => {
            assert_eq!(len, u32::MAX as u64);
            assert_eq!(max, HANDSHAKE_MAX_FRAME);
        }
        other => panic!("expected FrameTooLarge, got {other:?}"),
    }
}

#[test]
fn dimensions_must_match_the_payload() {
    // An Assign claiming n = 2, k = 1 (8 values) with only 4 values.
    let mut head = Vec::new();
    let msg = ToWorker::Assign {
        job: JobId(1),
        chunk: ChunkId(1),
        n: 2,
        k: 1,
    };
    frame::encode_head(&msg, 4, &mut head).expect("encodes");
    let mut buf = BytesMut::from(&head[..]);
    buf.extend_from_slice(&[0u8; 32]);
    assert!(matches!(
        frame::decode::<ToWorker>(&mut buf, BIG),
        Err(Error::PayloadMismatch { got: 4, expected: 8 })
    ));
    // Huge dimensions cannot overflow into a small expected length.
    let msg = ToWorker::Assign {
        job: JobId(1),
        chunk: ChunkId(1),
        n: u32::MAX,
        k: u32::MAX,
    };
    let mut head = Vec::new();
    frame::encode_head(&msg, 0, &mut head).expect("encodes");
    let mut buf = BytesMut::from(&head[..]);
    assert!(frame::decode::<ToWorker>(&mut buf, BIG).is_err());
    // Encoding refuses a payload that disagrees with the message.
    let bad = Frame::with_payload(msg, vec![1.0]);
    assert!(frame::encode(&bad, &mut BytesMut::new()).is_err());
}

#[test]
fn malformed_headers() {
    let check = |bytes: &[u8]| {
        let mut buf = BytesMut::from(bytes);
        assert!(
            matches!(frame::decode::<ToWorker>(&mut buf, BIG), Err(Error::Malformed(_))),
            "{bytes:?}"
        );
    };
    check(&[2, 0, 0, 0, 0, 0, 0, 0]); // body shorter than its header field
    check(&[8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // empty message header
    check(&[8, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0]); // header longer than the body
    check(&[5, 0, 0, 0, 1, 0, 0, 0, 200]); // unknown variant
}

#[test]
fn bincode_is_the_pinned_release() {
    // bincode 3.0.0 is an empty release; the workspace pins 2.0.1 exactly.
    let lock = include_str!("../../Cargo.lock");
    assert!(lock.contains("name = \"bincode\"\nversion = \"2.0.1\""));
}
