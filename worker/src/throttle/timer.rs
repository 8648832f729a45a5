//! Sleeps to a fraction of a millisecond, for link emulation. Tokio's timer
//! wakes on millisecond ticks: a link paced by it ends each message up to a
//! tick late, which on emulated links of hundreds of MB/s is the cost of
//! hundreds of kilobytes, per message. One thread keeps the deadlines in a
//! heap and sleeps on a condition variable until the earliest (the kernel
//! wakes it within tens of microseconds), then wakes the futures due.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

struct Entry {
    at: Instant,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Default)]
struct Deadlines {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

struct Shared {
    deadlines: Mutex<Deadlines>,
    changed: Condvar,
}

fn shared() -> Option<&'static Shared> {
    static SHARED: OnceLock<Option<&'static Shared>> = OnceLock::new();
    *SHARED.get_or_init(|| {
        let s: &'static Shared = Box::leak(Box::new(Shared {
            deadlines: Mutex::new(Deadlines::default()),
            changed: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("dls-link-timer".into())
            .spawn(move || run(s))
            .ok()
            .map(|_| s)
    })
}

/// The timer thread: wake whatever is due, sleep until the next deadline.
fn run(s: &'static Shared) {
    let Ok(mut d) = s.deadlines.lock() else { return };
    loop {
        let now = Instant::now();
        while d.heap.peek().is_some_and(|e| e.0.at <= now) {
            if let Some(Reverse(e)) = d.heap.pop() {
                e.waker.wake();
            }
        }
        let next = d.heap.peek().map(|e| e.0.at);
        d = match next {
            None => match s.changed.wait(d) {
                Ok(d) => d,
                Err(_) => return,
            },
            Some(at) => match s.changed.wait_timeout(d, at.saturating_duration_since(now)) {
                Ok((d, _)) => d,
                Err(_) => return,
            },
        };
    }
}

/// A future ready at `at` (give or take the kernel's wake-up latency).
pub struct Sleep {
    at: Instant,
}

pub fn sleep_until(at: Instant) -> Sleep {
    Sleep { at }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        let Some(s) = shared() else {
            // No timer thread (the system refused one): do not stall the
            // stream, let it through unpaced.
            return Poll::Ready(());
        };
        let Ok(mut d) = s.deadlines.lock() else {
            return Poll::Ready(());
        };
        d.seq += 1;
        let seq = d.seq;
        let earliest = d.heap.peek().is_none_or(|e| self.at < e.0.at);
        d.heap.push(Reverse(Entry {
            at: self.at,
            seq,
            waker: cx.waker().clone(),
        }));
        drop(d);
        if earliest {
            s.changed.notify_one();
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_sleep_ends_at_its_deadline_not_before() {
        // Deadlines registered out of order, some earlier than those
        // already waiting (the thread must be told of a new earliest).
        let t0 = Instant::now() + Duration::from_millis(1);
        let tasks: Vec<_> = [3000u64, 200, 1500, 700, 50, 2600, 120]
            .into_iter()
            .map(|us| {
                tokio::spawn(async move {
                    let at = t0 + Duration::from_micros(us);
                    sleep_until(at).await;
                    (at, Instant::now())
                })
            })
            .collect();
        for t in tasks {
            let (at, woke) = tokio::time::timeout(Duration::from_secs(10), t)
                .await
                .expect("every sleep is woken")
                .expect("task ran");
            assert!(woke >= at);
        }
    }

    #[tokio::test]
    async fn wake_ups_are_finer_than_a_millisecond() {
        // Tokio's timer rounds a 300 µs sleep up to its next millisecond
        // tick; this one wakes within a fraction of that (median of 21).
        let mut late = Vec::new();
        for _ in 0..21 {
            let at = Instant::now() + Duration::from_micros(300);
            sleep_until(at).await;
            late.push(Instant::now() - at);
        }
        late.sort();
        assert!(late[10] < Duration::from_micros(500), "median lateness {:?}", late[10]);
    }
}
