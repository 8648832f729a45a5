//! Write the fuzz corpus seeds: one valid frame of every message kind, plus
//! a few broken ones. `cargo run -p dls-protocol --example fuzz_seeds`
//! (writes protocol/fuzz/corpus/decode_frame/).

use bytes::BytesMut;
use dls_protocol::{
    frame, Capabilities, ChunkId, Cipher, DType, ErrorCode, Form, Frame, FromWorker, JobId, Shape, ToWorker,
};
use std::path::Path;

fn main() -> std::io::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode_frame");
    std::fs::create_dir_all(&dir)?;
    let (job, chunk) = (JobId(1), ChunkId(2));
    let rect = Form {
        shape: Shape { n: 1, k: 2, m: 3 },
        dtype: DType::F32,
        shared_b: true,
    };
    let to: Vec<Frame<ToWorker>> = vec![
        Frame::new(ToWorker::Hello {
            version: 1,
            nonce: [7; 32],
        }),
        Frame::new(ToWorker::Auth {
            proof: Some([9; 32]),
            max_frame: 1 << 20,
            encrypt: true,
            ciphers: vec![Cipher::Aes256Gcm, Cipher::ChaCha20Poly1305],
            status: false,
            control: Some(3),
            peer: None,
        }),
        Frame::with_payload(
            ToWorker::Assign {
                job,
                chunk,
                form: Form::square(2),
                count: 1,
            },
            (0..8).map(f64::from).collect::<Vec<f64>>(),
        ),
        Frame::with_payload(ToWorker::ShareB { job, form: rect }, vec![1.0f32; 6]),
        Frame::with_payload(
            ToWorker::Assign {
                job,
                chunk,
                form: rect,
                count: 2,
            },
            vec![2.0f32; 4],
        ),
        Frame::new(ToWorker::Grant { job, chunk }),
        Frame::new(ToWorker::Cancel { job }),
        Frame::new(ToWorker::Heartbeat { seq: 3 }),
        Frame::with_payload(ToWorker::Echo { len: 2 }, vec![1.0f64, 2.0]),
        Frame::new(ToWorker::Pull { len: 4 }),
        Frame::new(ToWorker::ComputeProbe {
            form: Form::square(8),
            count: 2,
        }),
        Frame::new(ToWorker::Bye),
    ];
    let from: Vec<Frame<FromWorker>> = vec![
        Frame::new(FromWorker::Challenge {
            version: 1,
            nonce: [1; 32],
            proof: None,
        }),
        Frame::new(FromWorker::Welcome(Capabilities {
            cores: 2,
            threads: 2,
            memory_limit: 1 << 30,
            kernel: "k".into(),
            emulated: false,
            ciphers: vec![Cipher::ChaCha20Poly1305],
            session: 3,
        })),
        Frame::new(FromWorker::Received { job, chunk }),
        Frame::new(FromWorker::Ready {
            job,
            chunk,
            compute_secs: 0.5,
        }),
        Frame::with_payload(
            FromWorker::Results {
                job,
                chunk,
                form: Form::square(1),
                count: 2,
            },
            vec![3.0f64, 4.0],
        ),
        Frame::with_payload(
            FromWorker::Results {
                job,
                chunk,
                form: rect,
                count: 1,
            },
            vec![5.0f32; 3],
        ),
        Frame::new(FromWorker::Error {
            code: ErrorCode::Busy,
            message: "busy".into(),
        }),
    ];
    let mut n = 0;
    let mut write = |bytes: &[u8]| -> std::io::Result<()> {
        n += 1;
        std::fs::write(dir.join(format!("seed-{n:02}")), bytes)
    };
    for f in &to {
        let mut b = BytesMut::new();
        frame::encode(f, &mut b).map_err(std::io::Error::other)?;
        write(&b)?;
    }
    for f in &from {
        let mut b = BytesMut::new();
        frame::encode(f, &mut b).map_err(std::io::Error::other)?;
        write(&b)?;
    }
    write(&[0xff, 0xff, 0xff, 0xff])?;
    write(&[5, 0, 0, 0, 1, 0, 0, 0, 200])?;
    println!("wrote {n} seeds to {}", dir.display());
    Ok(())
}
