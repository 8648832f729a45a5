//! `Outbox`: frames waiting for their turn on a connection's writing half
//! ([`crate::Connection::split`]), written in order by a task of their
//! own, so that the task owning the reading half keeps reading (and
//! checking what it read) while a long frame goes out. Both ends use it:
//! the master sends a worker's next chunk while the worker's results come
//! in, the worker returns results while its next chunk arrives (a
//! full-duplex link carries both at once).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A write under way: it gives the writing half back with what came of it.
pub type Writing<H, R> = Pin<Box<dyn Future<Output = (H, R)> + Send>>;

/// How one item is written: takes the writing half and gives it back.
pub type WriteFn<H, T, R> = fn(H, T) -> Writing<H, R>;

/// Items of type `T` written in order through the writing half `H`, each
/// write reporting an `R`.
pub struct Outbox<H, T, R> {
    items: mpsc::UnboundedSender<T>,
    /// Items written before any of `items` not yet begun.
    urgent: mpsc::UnboundedSender<T>,
    outcomes: mpsc::UnboundedReceiver<R>,
    /// Set: items not yet on the wire are dropped.
    drop_rest: Arc<AtomicBool>,
    writer: JoinHandle<H>,
    /// Items pushed whose outcome was not yet taken.
    pending: usize,
}

impl<H, T, R> Outbox<H, T, R>
where
    H: Send + 'static,
    T: Send + 'static,
    R: Send + 'static,
{
    /// The outbox of `half`, writing with `write` on a task of its own.
    pub fn new(half: H, write: WriteFn<H, T, R>) -> Self {
        let (items, mut rx) = mpsc::unbounded_channel::<T>();
        let (urgent, mut urgent_rx) = mpsc::unbounded_channel::<T>();
        let (done, outcomes) = mpsc::unbounded_channel::<R>();
        let drop_rest = Arc::new(AtomicBool::new(false));
        let dropping = drop_rest.clone();
        let writer = tokio::spawn(async move {
            let mut half = half;
            let (mut open, mut urgent_open) = (true, true);
            loop {
                let item = match urgent_rx.try_recv() {
                    Ok(item) => item,
                    Err(_) => tokio::select! {
                        biased;
                        x = urgent_rx.recv(), if urgent_open => match x {
                            Some(item) => item,
                            None => { urgent_open = false; continue; }
                        },
                        x = rx.recv(), if open => match x {
                            Some(item) => item,
                            None => { open = false; continue; }
                        },
                        else => break,
                    },
                };
                if dropping.load(Ordering::Relaxed) {
                    continue;
                }
                let (h, r) = write(half, item).await;
                half = h;
                // The owner may be gone: the half still comes back.
                let _ = done.send(r);
            }
            half
        });
        Outbox {
            items,
            urgent,
            outcomes,
            drop_rest,
            writer,
            pending: 0,
        }
    }

    /// Queue `item`; it goes on the wire once those before it are written.
    pub fn push(&mut self, item: T) {
        if self.items.send(item).is_ok() {
            self.pending += 1;
        }
    }

    /// Queue `item` ahead of every item pushed with [`Outbox::push`] that
    /// is not yet on the wire (after the write under way and other urgent
    /// items).
    pub fn push_urgent(&mut self, item: T) {
        if self.urgent.send(item).is_ok() {
            self.pending += 1;
        }
    }

    /// Whether every item pushed is written and its outcome taken.
    pub fn is_empty(&self) -> bool {
        self.pending == 0
    }

    /// What came of the next write, once it is over; never, while nothing
    /// is pushed. Cancel-safe (use it in `select!`).
    pub async fn wrote(&mut self) -> R {
        if self.pending == 0 {
            return std::future::pending().await;
        }
        match self.outcomes.recv().await {
            Some(r) => {
                self.pending -= 1;
                r
            }
            // The writing task is gone (it panicked): `finish` says so.
            None => std::future::pending().await,
        }
    }

    /// The writing half, once everything pushed is written (`flush`) or,
    /// otherwise, once the write under way is over (the rest is dropped),
    /// with what came of the writes not yet taken. A panic of the writing
    /// task goes on here.
    pub async fn finish(self, flush: bool) -> (H, Vec<R>) {
        let Outbox {
            items,
            urgent,
            mut outcomes,
            drop_rest,
            writer,
            ..
        } = self;
        drop_rest.store(!flush, Ordering::Relaxed);
        drop(items);
        drop(urgent);
        let half = match writer.await {
            Ok(h) => h,
            Err(e) => match e.try_into_panic() {
                Ok(p) => std::panic::resume_unwind(p),
                Err(e) => panic!("the writing task was cancelled: {e}"),
            },
        };
        let mut rest = Vec::new();
        while let Ok(r) = outcomes.try_recv() {
            rest.push(r);
        }
        (half, rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "half" that records what it wrote; a write of 0 fails.
    fn write(mut h: Vec<u32>, x: u32) -> Writing<Vec<u32>, Result<u32, u32>> {
        Box::pin(async move {
            tokio::task::yield_now().await;
            if x == 0 {
                return (h, Err(x));
            }
            h.push(x);
            (h, Ok(x))
        })
    }

    #[tokio::test]
    async fn items_are_written_in_order_one_at_a_time() {
        let mut out = Outbox::new(Vec::new(), write);
        assert!(out.is_empty());
        out.push(1);
        out.push(0);
        out.push(3);
        assert!(!out.is_empty());
        assert_eq!(out.wrote().await, Ok(1));
        assert_eq!(out.wrote().await, Err(0));
        out.push(4);
        let (h, rest) = out.finish(true).await;
        assert_eq!(rest, vec![Ok(3), Ok(4)]);
        assert_eq!(h, vec![1, 3, 4]);
        // Without flushing, what is not yet on the wire is dropped: on this
        // one-thread runtime the writing task takes 7 only after `finish`.
        let mut out = Outbox::new(Vec::new(), write);
        out.push(5);
        assert_eq!(out.wrote().await, Ok(5));
        out.push(7);
        let (h, rest) = out.finish(false).await;
        assert_eq!((h, rest), (vec![5], vec![]));
        // Nothing under way: `wrote` waits (a select! branch that never fires).
        let mut out = Outbox::new(Vec::new(), write);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(20), out.wrote()).await;
        assert!(waited.is_err());
    }

    #[tokio::test]
    async fn urgent_items_overtake_those_not_yet_begun() {
        let mut out = Outbox::new(Vec::new(), write);
        for x in [1, 2, 3, 4] {
            out.push(x);
        }
        // Once 1's outcome is in, the writer has begun 2 (on this one-thread
        // runtime it takes the next item before the outcome is read); 3
        // and 4 wait, and 9 goes before them.
        assert_eq!(out.wrote().await, Ok(1));
        out.push_urgent(9);
        let (h, rest) = out.finish(true).await;
        assert_eq!(h, vec![1, 2, 9, 3, 4]);
        assert_eq!(rest, vec![Ok(2), Ok(9), Ok(3), Ok(4)]);
    }
}
