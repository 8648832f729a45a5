//! The round schedules on their own: chunking, the order of transfers, and
//! events the plan does not allow. Whole runs, losses and timelines are
//! tested through the batch machine (`machine/tests.rs`).

use super::*;

#[test]
fn chunks_cover_the_batch_once_in_send_order() {
    let c = chunks(&[2, 0, 1], &[5, 0, 3], 2); // worker 0: 5 units, worker 2: 3
    let flat: Vec<(usize, usize, usize)> = c.iter().flatten().map(|c| (c.worker, c.start, c.len)).collect();
    assert_eq!(c[1].len(), 0);
    let mut covered: Vec<usize> = c.iter().flatten().flat_map(|c| c.start..c.start + c.len).collect();
    covered.sort_unstable();
    assert_eq!(covered, (0..8).collect::<Vec<_>>());
    // Worker 2 is sent first: it holds products 0..3.
    assert!(flat.contains(&(2, 0, 2)) && flat.contains(&(2, 2, 1)));
    let ids: std::collections::HashSet<_> = c.iter().flatten().map(|c| c.id).collect();
    assert_eq!(ids.len(), 5);
}

#[test]
fn protocol_violations_are_refused() {
    let mut ex = Executor::new(Ports::One, &[0, 1], &[0, 1], chunks(&[0, 1], &[2, 2], 10));
    let first = ex.next_send().expect("a first send");
    assert_eq!(first, ex.chunks()[0][0]);
    assert_eq!(ex.next_send(), None, "one send at a time");
    let c0 = ex.chunks()[0][0].id;
    let c1 = ex.chunks()[1][0].id;
    // Ready before Received, Results before Grant, unknown chunks.
    assert!(ex.on_event(Event::Ready { worker: 0, chunk: c0 }).is_err());
    assert!(ex.on_event(Event::Results { worker: 0, chunk: c0 }).is_err());
    assert!(ex.on_event(Event::Received { worker: 1, chunk: c1 }).is_err());
    assert!(ex
        .on_event(Event::Received {
            worker: 0,
            chunk: ChunkId(99)
        })
        .is_err());
    assert!(ex.on_event(Event::Received { worker: 5, chunk: c0 }).is_err());
    // The right one is accepted and the next send is worker 1's.
    ex.on_event(Event::Received { worker: 0, chunk: c0 }).expect("ok");
    assert_eq!(ex.next_send(), Some(ex.chunks()[1][0]));
    // One port: no return while a send of the round is still to come.
    ex.on_event(Event::Ready { worker: 0, chunk: c0 }).expect("ok");
    assert_eq!(ex.next_return(), None);
    ex.on_event(Event::Received { worker: 1, chunk: c1 }).expect("ok");
    assert_eq!(ex.next_return(), Some((0, c0)));
}

#[test]
fn a_worker_returns_only_once_all_its_chunks_are_computed() {
    let mut ex = Executor::new(Ports::Two, &[0], &[0], chunks(&[0], &[3], 1));
    let ids: Vec<ChunkId> = ex.chunks()[0].iter().map(|c| c.id).collect();
    for &id in &ids {
        assert_eq!(ex.next_send().map(|c| c.id), Some(id));
        ex.on_event(Event::Received { worker: 0, chunk: id }).expect("ok");
    }
    ex.on_event(Event::Ready {
        worker: 0,
        chunk: ids[0],
    })
    .expect("ok");
    ex.on_event(Event::Ready {
        worker: 0,
        chunk: ids[1],
    })
    .expect("ok");
    assert_eq!(ex.next_return(), None, "its turn waits for the last chunk");
    ex.on_event(Event::Ready {
        worker: 0,
        chunk: ids[2],
    })
    .expect("ok");
    for &id in &ids {
        assert_eq!(ex.next_return(), Some((0, id)));
        ex.on_event(Event::Results { worker: 0, chunk: id }).expect("ok");
    }
    assert!(ex.done());
}

#[test]
fn a_lost_worker_hands_back_exactly_its_unreturned_chunks() {
    let mut ex = Executor::new(Ports::One, &[0, 1], &[0, 1], chunks(&[0, 1], &[2, 3], 1));
    let all: Vec<Chunk> = ex.chunks().iter().flatten().copied().collect();
    // Worker 0 gets both its chunks and returns the first; worker 1 is lost
    // before anything of it is sent.
    let w0: Vec<ChunkId> = ex.chunks()[0].iter().map(|c| c.id).collect();
    for &id in &w0 {
        ex.next_send();
        ex.on_event(Event::Received { worker: 0, chunk: id }).expect("ok");
    }
    let lost1 = ex.lose(1);
    assert_eq!(lost1, all[2..].to_vec());
    for &id in &w0 {
        ex.on_event(Event::Ready { worker: 0, chunk: id }).expect("ok");
    }
    assert_eq!(ex.next_return(), Some((0, w0[0])));
    ex.on_event(Event::Results {
        worker: 0,
        chunk: w0[0],
    })
    .expect("ok");
    assert_eq!(ex.lose(0), vec![all[1]], "only the unreturned chunk");
    assert!(ex.lose(0).is_empty(), "losing twice hands back nothing");
    assert!(ex.done());
}
