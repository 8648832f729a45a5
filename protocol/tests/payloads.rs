//! A connection reads a frame's payload into the memory its payload source
//! gives, where that is of the payload's type and length, and into fresh
//! zeros otherwise: the values read are the values written either way.

use dls_protocol::*;
use std::sync::{Arc, Mutex};

fn panel(n: u32, k: u32, m: u32) -> (ToWorker, Values) {
    let form = Form {
        shape: Shape { n, k, m },
        dtype: DType::F64,
        shared_b: false,
    };
    let len = form.in_len(1) as usize;
    let msg = ToWorker::Panel {
        job: JobId(1),
        piece: ChunkId(2),
        form,
        depth: k,
        last: false,
    };
    (msg, Values::F64((0..len).map(|i| i as f64 * 0.5 - 3.0).collect()))
}

/// Send `msg` with `payload` through a small pipe (so that the payload
/// arrives after its head) to a connection reading from `source`.
async fn through(msg: ToWorker, payload: Values, source: Option<PayloadSource>) -> Frame<ToWorker> {
    let (a, b) = tokio::io::duplex(256);
    let mut master: Connection<_, FromWorker, ToWorker> = Connection::new(a);
    let mut worker: Connection<_, ToWorker, FromWorker> = Connection::new(b);
    master.set_max_frame(1 << 30);
    worker.set_max_frame(1 << 30);
    if let Some(s) = source {
        worker.set_payload_source(s);
    }
    let (sent, got) = tokio::join!(master.write_frame(&msg, &payload), worker.read_frame());
    sent.expect("written");
    got.expect("read").expect("a frame")
}

#[tokio::test]
async fn a_payload_is_read_into_the_memory_given_and_right_whatever_it_held() {
    let (msg, payload) = panel(60, 10, 40);
    let len = payload.len();
    let given = Values::F64(vec![-7.0; len]);
    let at = given.as_bytes().as_ptr() as usize;
    let slot = Arc::new(Mutex::new(Some(given)));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let (s, a) = (slot.clone(), asked.clone());
    let source: PayloadSource = Arc::new(move |dtype, n| {
        a.lock().expect("not poisoned").push((dtype, n));
        s.lock().expect("not poisoned").take()
    });
    let frame = through(msg, payload.clone(), Some(source)).await;
    assert_eq!(frame.payload, payload);
    assert_eq!(frame.payload.as_bytes().as_ptr() as usize, at, "the memory given");
    assert_eq!(*asked.lock().expect("not poisoned"), vec![(DType::F64, len)]);
}

#[tokio::test]
async fn memory_of_another_length_or_type_is_not_used() {
    let (msg, payload) = panel(30, 8, 20);
    let len = payload.len();
    for wrong in [Values::F64(vec![-7.0; len + 1]), Values::F32(vec![-7.0; len])] {
        let slot = Arc::new(Mutex::new(Some(wrong)));
        let source: PayloadSource = Arc::new(move |_, _| slot.lock().expect("not poisoned").take());
        let frame = through(msg.clone(), payload.clone(), Some(source)).await;
        assert_eq!(frame.payload, payload);
    }
    // No source, or one with nothing to give: fresh memory.
    assert_eq!(through(msg.clone(), payload.clone(), None).await.payload, payload);
    let none: PayloadSource = Arc::new(|_, _| None);
    assert_eq!(through(msg, payload.clone(), Some(none)).await.payload, payload);
}
