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
        ciphers(),
        any::<u64>(),
    )
        .prop_map(
            |(cores, threads, memory_limit, kernel, emulated, ciphers, session)| Capabilities {
                cores,
                threads,
                memory_limit,
                kernel,
                emulated,
                ciphers,
                session,
            },
        )
}

/// Any list of ciphers (repeats included: a peer may send anything).
fn ciphers() -> impl Strategy<Value = Vec<Cipher>> {
    proptest::collection::vec(
        prop_oneof![Just(Cipher::Aes256Gcm), Just(Cipher::ChaCha20Poly1305)],
        0..4,
    )
}

/// A small form of any type, shape and sharing, and a chunk size.
fn small_form() -> impl Strategy<Value = (Form, u32)> {
    (0u32..6, 0u32..5, 0u32..4, any::<bool>(), any::<bool>(), 0u32..4).prop_map(|(n, k, m, f32, shared_b, count)| {
        let dtype = if f32 { DType::F32 } else { DType::F64 };
        let form = Form {
            shape: Shape { n, k, m },
            dtype,
            shared_b,
        };
        (form, count)
    })
}

/// `len` arbitrary values (any bits, NaN included) of type `dtype`.
fn values(dtype: DType, len: u64) -> BoxedStrategy<Values> {
    match dtype {
        DType::F32 => proptest::collection::vec(any::<f32>(), len as usize)
            .prop_map(Values::F32)
            .boxed(),
        DType::F64 => proptest::collection::vec(any::<f64>(), len as usize)
            .prop_map(Values::F64)
            .boxed(),
    }
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
            ciphers(),
            any::<bool>(),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>())
        )
            .prop_map(
                |(proof, max_frame, encrypt, ciphers, status, control, peer)| Frame::new(ToWorker::Auth {
                    proof,
                    max_frame,
                    encrypt,
                    ciphers,
                    status,
                    control,
                    peer
                })
            ),
        (job.clone(), chunk.clone(), small_form()).prop_flat_map(|(job, chunk, (form, count))| {
            values(form.dtype, form.in_len(count)).prop_map(move |p| {
                Frame::with_payload(
                    ToWorker::Assign {
                        job,
                        chunk,
                        form,
                        count,
                    },
                    p,
                )
            })
        }),
        (job.clone(), chunk.clone(), small_form(), any::<u32>(), any::<bool>()).prop_flat_map(
            |(job, piece, (mut form, _), depth, last)| {
                form.shared_b = false;
                values(form.dtype, form.in_len(1)).prop_map(move |p| {
                    Frame::with_payload(
                        ToWorker::Panel {
                            job,
                            piece,
                            form,
                            depth,
                            last,
                        },
                        p,
                    )
                })
            }
        ),
        (job.clone(), small_form()).prop_flat_map(|(job, (form, _))| {
            values(form.dtype, form.shape.b_len())
                .prop_map(move |p| Frame::with_payload(ToWorker::ShareB { job, form }, p))
        }),
        (job.clone(), chunk).prop_map(|(job, chunk)| Frame::new(ToWorker::Grant { job, chunk })),
        job.prop_map(|job| Frame::new(ToWorker::Cancel { job })),
        any::<u64>().prop_map(|seq| Frame::new(ToWorker::Heartbeat { seq })),
        proptest::collection::vec(any::<f64>(), 0..50)
            .prop_map(|p| Frame::with_payload(ToWorker::Echo { len: p.len() as u64 }, p)),
        any::<u64>().prop_map(|len| Frame::new(ToWorker::Pull { len })),
        small_form().prop_map(|(form, count)| Frame::new(ToWorker::ComputeProbe { form, count })),
        Just(Frame::new(ToWorker::Bye)),
        (any::<u64>(), any::<u64>(), small_form(), any::<u64>()).prop_flat_map(|(job, chunk, (form, count), cut)| {
            let (job, chunk) = (JobId(job), ChunkId(chunk));
            // A piece: any part of its chunk's values, all of them included.
            let len = cut % (form.in_len(count) + 1);
            values(form.dtype, len).prop_map(move |p| {
                Frame::with_payload(
                    ToWorker::Part {
                        job,
                        chunk,
                        form,
                        count,
                        len,
                    },
                    p,
                )
            })
        }),
        (
            any::<u64>(),
            any::<bool>(),
            span(),
            span(),
            proptest::collection::vec((any::<u64>(), any::<u32>()), 0..4),
            proptest::collection::vec(any::<u32>(), 0..4),
            proptest::collection::vec((".{0,20}", any::<u64>()), 0..3),
        )
            .prop_map(|(job, f32, rows, cols, bands, steps, peers)| {
                Frame::new(ToWorker::Exchange {
                    job: JobId(job),
                    dtype: if f32 { DType::F32 } else { DType::F64 },
                    rows,
                    cols,
                    bands: bands.into_iter().map(|(c, w)| (ChunkId(c), w)).collect(),
                    steps,
                    peers: peers
                        .into_iter()
                        .map(|(addr, session)| PeerAddr { addr, session })
                        .collect(),
                })
            }),
        (
            any::<u64>(),
            any::<u32>(),
            any::<bool>(),
            span(),
            any::<bool>(),
            0u64..40,
            proptest::collection::vec(any::<u32>(), 0..4),
        )
            .prop_flat_map(|(job, stage, rows, at, f32, len, forward)| {
                let dtype = if f32 { DType::F32 } else { DType::F64 };
                let part = if rows { SharePart::Rows(at) } else { SharePart::Cols(at) };
                values(dtype, len).prop_map(move |p| {
                    Frame::with_payload(
                        ToWorker::Share {
                            job: JobId(job),
                            stage,
                            part,
                            dtype,
                            len,
                            forward: forward.clone(),
                        },
                        p,
                    )
                })
            }),
    ]
}

fn span() -> impl Strategy<Value = Span> {
    (any::<u32>(), any::<u32>()).prop_map(|(start, len)| Span { start, len })
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
        (job, chunk, small_form()).prop_flat_map(|(job, chunk, (form, count))| {
            values(form.dtype, form.shape.c_len() * count as u64).prop_map(move |p| {
                Frame::with_payload(
                    FromWorker::Results {
                        job,
                        chunk,
                        form,
                        count,
                    },
                    p,
                )
            })
        }),
        any::<u64>().prop_map(|len| Frame::new(FromWorker::EchoAck { len })),
        proptest::collection::vec(any::<f64>(), 0..50)
            .prop_map(|p| Frame::with_payload(FromWorker::PullData { len: p.len() as u64 }, p)),
        (any::<u32>(), any::<f64>()).prop_map(|(count, secs)| Frame::new(FromWorker::ComputeDone { count, secs })),
        any::<u64>().prop_map(|seq| Frame::new(FromWorker::HeartbeatAck { seq })),
        (error_code(), ".{0,40}").prop_map(|(code, message)| Frame::new(FromWorker::Error { code, message })),
        Just(Frame::new(FromWorker::Bye)),
        (any::<u64>(), any::<u32>(), ".{0,40}").prop_map(|(job, peer, message)| Frame::new(FromWorker::PeerFailed {
            job: JobId(job),
            peer,
            message
        })),
    ]
}

/// Frames compare bit for bit (NaN payloads included).
fn same<M: PartialEq + std::fmt::Debug>(a: &Frame<M>, b: &Frame<M>) {
    assert_eq!(a.msg, b.msg);
    // Empty payloads carry no type; any other keeps its type and bits.
    if !(a.payload.is_empty() && b.payload.is_empty()) {
        assert_eq!(a.payload.dtype(), b.payload.dtype());
    }
    assert_eq!(a.payload.as_bytes(), b.payload.as_bytes());
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
    // An Assign claiming one 2×2 product (8 values) with only 4 values.
    let mut head = Vec::new();
    let msg = ToWorker::Assign {
        job: JobId(1),
        chunk: ChunkId(1),
        form: Form::square(2),
        count: 1,
    };
    frame::encode_head(&msg, 32, &mut head).expect("encodes");
    let mut buf = BytesMut::from(&head[..]);
    buf.extend_from_slice(&[0u8; 32]);
    assert!(matches!(
        frame::decode::<ToWorker>(&mut buf, BIG),
        Err(Error::PayloadMismatch { got: 4, expected: 8 })
    ));
    // The same 32 bytes are 8 float32 values: a 2×2 float32 product is 4
    // values of A and 4 of B, so they pass as that.
    let f32_msg = ToWorker::Assign {
        job: JobId(1),
        chunk: ChunkId(1),
        form: Form {
            dtype: DType::F32,
            ..Form::square(2)
        },
        count: 1,
    };
    let mut head = Vec::new();
    frame::encode_head(&f32_msg, 32, &mut head).expect("encodes");
    let mut buf = BytesMut::from(&head[..]);
    buf.extend_from_slice(&[0u8; 32]);
    let f = frame::decode::<ToWorker>(&mut buf, BIG).expect("valid").expect("whole");
    assert_eq!(f.payload, Values::F32(vec![0.0; 8]));
    // Shared B: the chunk carries A only (4 values).
    let shared = ToWorker::Assign {
        job: JobId(1),
        chunk: ChunkId(1),
        form: Form {
            shared_b: true,
            ..Form::square(2)
        },
        count: 1,
    };
    assert_eq!(shared.payload().expect("fits"), (DType::F64, 4));
    // A payload of the right length in the wrong type is refused.
    assert!(frame::encode(&Frame::with_payload(f32_msg, vec![0.0f64; 8]), &mut BytesMut::new()).is_err());
    // Huge dimensions cannot overflow into a small expected length.
    let msg = ToWorker::Assign {
        job: JobId(1),
        chunk: ChunkId(1),
        form: Form {
            shape: Shape {
                n: u32::MAX,
                k: u32::MAX,
                m: u32::MAX,
            },
            ..Form::square(1)
        },
        count: u32::MAX,
    };
    let mut head = Vec::new();
    frame::encode_head(&msg, 0, &mut head).expect("encodes");
    let mut buf = BytesMut::from(&head[..]);
    assert!(frame::decode::<ToWorker>(&mut buf, BIG).is_err());
    // Encoding refuses a payload that disagrees with the message.
    let bad = Frame::with_payload(msg, vec![1.0f64]);
    assert!(frame::encode(&bad, &mut BytesMut::new()).is_err());
}

#[test]
fn a_piece_larger_than_its_chunk_is_refused_by_name() {
    // One 2×2 product carries 8 values: a piece of 9 is no piece of it.
    let msg = ToWorker::Part {
        job: JobId(1),
        chunk: ChunkId(1),
        form: Form::square(2),
        count: 1,
        len: 9,
    };
    match msg.payload() {
        Err(Error::Malformed(m)) => assert!(m.contains("a piece of 9 values"), "{m}"),
        other => panic!("expected Malformed, got {other:?}"),
    }
    let mut head = Vec::new();
    frame::encode_head(&msg, 72, &mut head).expect("encodes");
    let mut buf = BytesMut::from(&head[..]);
    buf.extend_from_slice(&[0u8; 72]);
    assert!(matches!(
        frame::decode::<ToWorker>(&mut buf, BIG),
        Err(Error::Malformed(_))
    ));
    // The whole chunk in one piece is one.
    let whole = ToWorker::Part {
        job: JobId(1),
        chunk: ChunkId(1),
        form: Form::square(2),
        count: 1,
        len: 8,
    };
    assert_eq!(whole.payload().expect("fits"), (DType::F64, 8));
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
