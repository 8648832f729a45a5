//! A planned round's schedule on its own: pieces, the order of transfers,
//! and events the plan does not allow. Whole runs, losses and timelines are
//! tested through the batch machine (`machine/tests/`).

use super::*;
use dls_lp::{Platform, Scenario, Worker};

fn platform(p: usize) -> Platform {
    Platform::new((0..p).map(|i| Worker::new(format!("w{i}"), 0.01, 0.1, 0.005)).collect()).expect("valid")
}

/// The one-round schedule of `loads` in FIFO order `order`, pieces of at
/// most `max_piece` products.
/// The next send, started on `port`.
fn send(s: &mut Sequenced, port: &mut Port) -> Option<Chunk> {
    let c = s.next_send(port)?;
    port.start(c.worker, c.id, true, c.len);
    Some(c)
}

/// The next return granted, started on `port`.
fn ret(s: &mut Sequenced, port: &mut Port) -> Option<(usize, ChunkId)> {
    let (w, id, len) = s.next_return(port)?;
    port.start(w, id, false, len);
    Some((w, id))
}

/// An event for the schedule; a transfer it ends leaves `port`.
fn ev(s: &mut Sequenced, port: &mut Port, e: Event) -> Result<(), Unexpected> {
    s.on_event(e)?;
    match e {
        Event::Received { worker, chunk } => port.end(worker, chunk, true),
        Event::Results { worker, chunk } => port.end(worker, chunk, false),
        Event::Ready { .. } => true,
    };
    Ok(())
}

fn one_round(ports: Ports, order: &[usize], loads: &[u64], max_piece: usize) -> Sequenced {
    let pl = platform(loads.len());
    let seq = Sequence::one_round(&pl, &Scenario::fifo(order.to_vec()), loads, ports);
    Sequenced::new(ports, pl.workers(), &seq, max_piece, 0)
}

#[test]
fn pieces_cover_the_batch_once_in_send_order() {
    let s = one_round(Ports::One, &[2, 0, 1], &[5, 0, 3], 2);
    let flat: Vec<(usize, usize, usize)> = s.pieces().iter().map(|c| (c.worker, c.start, c.len)).collect();
    assert!(flat.iter().all(|&(w, _, _)| w != 1), "worker 1 has no load");
    let mut covered: Vec<usize> = s.pieces().iter().flat_map(|c| c.start..c.start + c.len).collect();
    covered.sort_unstable();
    assert_eq!(covered, (0..8).collect::<Vec<_>>());
    // Worker 2 is sent first: it holds products 0..3, in pieces of 2 and 1.
    assert!(flat.contains(&(2, 0, 2)) && flat.contains(&(2, 2, 1)));
    let ids: std::collections::HashSet<_> = s.pieces().iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), 5);
}

#[test]
fn protocol_violations_are_refused() {
    let mut s = one_round(Ports::One, &[0, 1], &[2, 2], 10);
    let mut port = Port::new(Ports::One, platform(3).workers());
    let (c0, c1) = (s.pieces()[0], s.pieces()[1]);
    assert_eq!(send(&mut s, &mut port), Some(c0));
    assert_eq!(send(&mut s, &mut port), None, "one send at a time");
    // Ready before Received, Results before Grant, unknown chunks.
    assert!(s
        .on_event(Event::Ready {
            worker: 0,
            chunk: c0.id
        })
        .is_err());
    assert!(s
        .on_event(Event::Results {
            worker: 0,
            chunk: c0.id
        })
        .is_err());
    assert!(s
        .on_event(Event::Received {
            worker: 1,
            chunk: c1.id
        })
        .is_err());
    let unknown = Event::Received {
        worker: 0,
        chunk: ChunkId(99),
    };
    assert!(ev(&mut s, &mut port, unknown).is_err());
    assert!(s
        .on_event(Event::Received {
            worker: 5,
            chunk: c0.id
        })
        .is_err());
    // The right one is accepted and the next send is worker 1's.
    ev(
        &mut s,
        &mut port,
        Event::Received {
            worker: 0,
            chunk: c0.id,
        },
    )
    .expect("ok");
    assert_eq!(send(&mut s, &mut port), Some(c1));
    // One round on one port: no return while a send is still to come.
    ev(
        &mut s,
        &mut port,
        Event::Ready {
            worker: 0,
            chunk: c0.id,
        },
    )
    .expect("ok");
    assert_eq!(ret(&mut s, &mut port), None);
    ev(
        &mut s,
        &mut port,
        Event::Received {
            worker: 1,
            chunk: c1.id,
        },
    )
    .expect("ok");
    assert_eq!(ret(&mut s, &mut port), Some((0, c0.id)));
}

#[test]
fn pieces_return_in_order_each_once_computed() {
    let mut s = one_round(Ports::Two, &[0], &[3], 1);
    let mut port = Port::new(Ports::Two, platform(3).workers());
    let ids: Vec<ChunkId> = s.pieces().iter().map(|c| c.id).collect();
    for &id in &ids {
        assert_eq!(send(&mut s, &mut port).map(|c| c.id), Some(id));
        ev(&mut s, &mut port, Event::Received { worker: 0, chunk: id }).expect("ok");
    }
    ev(
        &mut s,
        &mut port,
        Event::Ready {
            worker: 0,
            chunk: ids[1],
        },
    )
    .expect("ok");
    assert_eq!(ret(&mut s, &mut port), None, "the first piece goes first");
    ev(
        &mut s,
        &mut port,
        Event::Ready {
            worker: 0,
            chunk: ids[0],
        },
    )
    .expect("ok");
    for (k, &id) in ids.iter().enumerate() {
        if k == 2 {
            assert_eq!(ret(&mut s, &mut port), None, "the last piece is not computed");
            ev(&mut s, &mut port, Event::Ready { worker: 0, chunk: id }).expect("ok");
        }
        assert_eq!(ret(&mut s, &mut port), Some((0, id)));
        ev(&mut s, &mut port, Event::Results { worker: 0, chunk: id }).expect("ok");
    }
    assert!(s.done());
}

#[test]
fn a_lost_worker_hands_back_exactly_its_unreturned_chunks() {
    let mut s = one_round(Ports::One, &[0, 1], &[2, 3], 1);
    let mut port = Port::new(Ports::One, platform(3).workers());
    let all: Vec<Chunk> = s.pieces().to_vec();
    // Worker 0 gets both its pieces and returns the first; worker 1 is lost
    // before anything of it is sent.
    let w0: Vec<ChunkId> = all[..2].iter().map(|c| c.id).collect();
    for &id in &w0 {
        send(&mut s, &mut port);
        ev(&mut s, &mut port, Event::Received { worker: 0, chunk: id }).expect("ok");
    }
    assert_eq!(s.lose(1), all[2..].to_vec());
    for &id in &w0 {
        ev(&mut s, &mut port, Event::Ready { worker: 0, chunk: id }).expect("ok");
    }
    assert_eq!(ret(&mut s, &mut port), Some((0, w0[0])));
    ev(
        &mut s,
        &mut port,
        Event::Results {
            worker: 0,
            chunk: w0[0],
        },
    )
    .expect("ok");
    assert_eq!(s.lose(0), vec![all[1]], "only the unreturned chunk");
    assert!(s.lose(0).is_empty(), "losing twice hands back nothing");
    assert!(s.done());
}
