//! A worker's acknowledgements put back in order. With a control line
//! (`runtime/link.rs`) a worker says `Received` there and `Ready` on its
//! connection, behind whatever results it is writing: so a `Ready` may
//! overtake the `Received` of the same chunk (or panel: a piece's panels
//! all share its number), which the machine would refuse. A `Ready` that
//! comes first is preceded by the `Received` it implies, and the late one
//! is dropped when it comes. Plain bookkeeping; the link task does the I/O.

use dls_protocol::ChunkId;
use std::collections::HashMap;

/// Per chunk: `Received` passed on, `Ready` seen, and `Received` passed
/// on ahead of the worker's (still owed by it, to be dropped).
#[derive(Default)]
pub(super) struct Order {
    per: HashMap<ChunkId, (u32, u32, u32)>,
}

impl Order {
    /// A `Received` of `chunk`: whether to pass it on (not when one was
    /// passed on for it already, ahead of its `Ready`).
    pub fn received(&mut self, chunk: ChunkId) -> bool {
        let e = self.per.entry(chunk).or_default();
        if e.2 > 0 {
            e.2 -= 1;
            false
        } else {
            e.0 += 1;
            true
        }
    }

    /// A `Ready` of `chunk`: whether a `Received` must be passed on first
    /// (the worker's has not come yet).
    pub fn ready(&mut self, chunk: ChunkId) -> bool {
        let e = self.per.entry(chunk).or_default();
        e.1 += 1;
        if e.1 > e.0 {
            e.0 += 1;
            e.2 += 1;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every interleaving of two chunks' acknowledgements as a worker may
    /// send them on two lines (each line in order: a chunk's Received on
    /// the control line, its Ready on the connection), against what the
    /// machine must see: for each chunk, Received then Ready, once each
    /// per panel.
    #[test]
    fn every_interleaving_comes_out_received_before_ready() {
        // Panels of one piece (chunk 7, three panels) and a chunk 8.
        let control = [(7, 'r'), (7, 'r'), (8, 'r'), (7, 'r')];
        let conn = [(7, 'd'), (8, 'd'), (7, 'd'), (7, 'd')];
        // Every merge of the two sequences that keeps each in order and
        // never has a Ready before its own Received was sent: the worker
        // sends a panel's Ready only after its Received.
        let mut merges = Vec::new();
        fn merge(a: &[(u64, char)], b: &[(u64, char)], acc: &mut Vec<(u64, char)>, out: &mut Vec<Vec<(u64, char)>>) {
            if a.is_empty() && b.is_empty() {
                out.push(acc.clone());
                return;
            }
            if let Some((x, rest)) = a.split_first() {
                acc.push(*x);
                merge(rest, b, acc, out);
                acc.pop();
            }
            if let Some((x, rest)) = b.split_first() {
                acc.push(*x);
                merge(a, rest, acc, out);
                acc.pop();
            }
        }
        merge(&control, &conn, &mut Vec::new(), &mut merges);
        assert_eq!(merges.len(), 70);
        for m in merges {
            let mut order = Order::default();
            let mut seen: Vec<(u64, char)> = Vec::new();
            for &(c, what) in &m {
                match what {
                    'r' => {
                        if order.received(ChunkId(c)) {
                            seen.push((c, 'r'));
                        }
                    }
                    _ => {
                        if order.ready(ChunkId(c)) {
                            seen.push((c, 'r'));
                        }
                        seen.push((c, 'd'));
                    }
                }
            }
            // Each chunk: as many Received as panels, and at every point
            // no more Ready than Received.
            for c in [7u64, 8] {
                let (mut r, mut d) = (0, 0);
                for &(x, w) in &seen {
                    if x == c {
                        if w == 'r' {
                            r += 1
                        } else {
                            d += 1
                        }
                        assert!(d <= r, "{m:?} -> {seen:?}");
                    }
                }
                let panels = if c == 7 { 3 } else { 1 };
                assert_eq!((r, d), (panels, panels), "{m:?} -> {seen:?}");
            }
        }
    }
}
