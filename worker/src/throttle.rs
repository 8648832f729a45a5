//! Link-rate emulation (`--link-rate`): a stream wrapper that moves bytes
//! no faster than `rate` bytes per second each way, as a link of that rate
//! would. Emulation only, as the report does to make identical nodes look
//! heterogeneous; off by default.
//!
//! Bytes are paid for before they are used: a slice read from the socket is
//! handed to the reader only once the link would have carried it, and a
//! slice written is handed to the socket only then. An idle link starts
//! afresh: no burst is carried over, so a message of n bytes takes at
//! least n / rate whatever its size (were a link to grant a millisecond's
//! worth after each pause, messages of a few hundred kilobytes would cross
//! it at loopback speed while larger ones paid the rate: calibration, which
//! probes large messages, and runs of many small chunks would disagree).
//!
//! Slices wait on a timer finer than tokio's millisecond ticks
//! (`timer.rs`): a tick's lateness per message would cost, on a link of
//! hundreds of MB/s, as much as hundreds of kilobytes. While bytes stream
//! without a pause, the pace is kept on the ideal timeline (the next slice
//! is due when the previous one was due, not when the timer fired), so
//! lateness does not add up: a long transfer keeps the rate.

mod timer;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;
use std::time::Instant;
use timer::Sleep;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// At most this many bytes are paid for at once.
const SLICE: usize = 64 * 1024;

/// A slice due less than this far ahead is released at once (a sleep
/// would end later than that anyway); the pace stays on the ideal timeline.
const EARLY: Duration = Duration::from_micros(20);

/// A slice taken this soon after the timer released the previous one
/// continues a stream: it starts when that one was due, not when the timer
/// fired. Taken later, the link has idled and it starts now.
const STREAM_GAP: Duration = Duration::from_micros(250);

/// One direction's pace and the slice waiting to be released.
#[derive(Default)]
struct Pace {
    /// When the link is free again on the ideal timeline.
    next_free: Option<Instant>,
    /// When the timer last released a slice.
    released: Option<Instant>,
    held: Vec<u8>,
    pos: usize,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl Pace {
    fn has_held(&self) -> bool {
        self.pos < self.held.len()
    }

    /// Hold the slice now in `held`, paid for on this link at `rate` (if
    /// any) and on a shared uplink (if any); true if it may be released at
    /// once.
    fn hold(&mut self, rate: Option<f64>, uplink: Option<&SharedPace>) -> bool {
        let now = Instant::now();
        let mut due = now;
        if let Some(rate) = rate {
            let streaming = self
                .released
                .is_some_and(|r| now.saturating_duration_since(r) <= STREAM_GAP);
            let start = match self.next_free {
                Some(t) if streaming => t,
                Some(t) => t.max(now),
                None => now,
            };
            due = start + Duration::from_secs_f64(self.held.len() as f64 / rate);
            self.next_free = Some(due);
        }
        if let Some(up) = uplink {
            due = due.max(up.reserve(self.held.len(), now));
        }
        self.pos = 0;
        if due > now + EARLY {
            self.sleep = Some(Box::pin(timer::sleep_until(due)));
            false
        } else {
            true
        }
    }

    /// Ready once the held slice may be released.
    fn wait(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(s) = &mut self.sleep {
            ready!(s.as_mut().poll(cx));
            self.sleep = None;
            self.released = Some(Instant::now());
        }
        Poll::Ready(())
    }
}

/// The capacity of one direction of an emulated uplink, shared by every
/// link that uses it: slices reserve its time one after the other, so that
/// links carrying bytes at once share its rate (64 KiB slices interleave
/// finely enough to share it evenly).
#[derive(Debug)]
pub struct SharedPace {
    rate: f64,
    next_free: Mutex<Option<Instant>>,
}

impl SharedPace {
    /// When a slice of `bytes` taken at `now` has crossed the uplink: after
    /// the slices reserved before it. A stream that continues within
    /// [`STREAM_GAP`] of the uplink's last slice starts when that one was
    /// due, as on a link.
    fn reserve(&self, bytes: usize, now: Instant) -> Instant {
        let mut next = self.next_free.lock().unwrap_or_else(|e| e.into_inner());
        let start = match *next {
            Some(t) if t + STREAM_GAP >= now => t,
            _ => now,
        };
        let due = start + Duration::from_secs_f64(bytes as f64 / self.rate);
        *next = Some(due);
        due
    }
}

/// Emulation: the master's uplink in front of several workers of one
/// process (`dls demo`, the experiments, tests), as behind a switch: what
/// the master sends to any of them crosses `to_workers`, what they return
/// crosses `from_workers`; one capacity for both when it is half duplex
/// (one port's worth of bandwidth), one each way when full duplex.
#[derive(Debug, Clone)]
pub struct SharedUplink {
    pub to_workers: Arc<SharedPace>,
    pub from_workers: Arc<SharedPace>,
}

impl SharedUplink {
    /// An uplink of `rate` bytes per second (each way, if `duplex`);
    /// `None` unless the rate is positive and finite.
    pub fn new(rate: f64, duplex: bool) -> Option<SharedUplink> {
        if !(rate.is_finite() && rate > 0.0) {
            return None;
        }
        let pace = || {
            Arc::new(SharedPace {
                rate,
                next_free: Mutex::new(None),
            })
        };
        let to_workers = pace();
        let from_workers = if duplex { pace() } else { to_workers.clone() };
        Some(SharedUplink {
            to_workers,
            from_workers,
        })
    }
}

/// A stream, optionally throttled to `rate` bytes per second each way, and
/// behind an emulated uplink shared with other streams.
pub struct Throttled<S> {
    inner: S,
    rate: Option<f64>,
    uplink: Option<SharedUplink>,
    read: Pace,
    write: Pace,
}

impl<S> Throttled<S> {
    /// `rate`: bytes per second, or `None` for no limit.
    pub fn new(inner: S, rate: Option<f64>) -> Self {
        Throttled {
            inner,
            rate: rate.filter(|r| r.is_finite() && *r > 0.0),
            uplink: None,
            read: Pace::default(),
            write: Pace::default(),
        }
    }

    /// The worker's end of a link behind `uplink`: what it reads was sent
    /// by the master across the uplink, what it writes returns across it.
    pub fn behind(mut self, uplink: Option<SharedUplink>) -> Self {
        self.uplink = uplink;
        self
    }

    /// Take the stream out from behind the uplink (a peer's connection
    /// turns out not to cross it).
    pub fn leave_uplink(&mut self) {
        self.uplink = None;
    }

    fn paced(&self) -> bool {
        self.rate.is_some() || self.uplink.is_some()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Throttled<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.paced() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        if !this.read.has_held() {
            let pace = &mut this.read;
            pace.held.resize(SLICE, 0);
            let mut sub = ReadBuf::new(&mut pace.held);
            let got = Pin::new(&mut this.inner).poll_read(cx, &mut sub);
            let n = sub.filled().len();
            pace.held.truncate(n);
            pace.pos = 0;
            match got? {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) if n == 0 => return Poll::Ready(Ok(())),
                Poll::Ready(()) => {
                    pace.hold(this.rate, this.uplink.as_ref().map(|u| &*u.to_workers));
                }
            }
        }
        ready!(this.read.wait(cx));
        let pace = &mut this.read;
        let n = buf.remaining().min(pace.held.len() - pace.pos);
        buf.put_slice(&pace.held[pace.pos..pace.pos + n]);
        pace.pos += n;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> Throttled<S> {
    /// Hand the held slice to the socket once it is due.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.write.wait(cx));
        while self.write.has_held() {
            let pace = &mut self.write;
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &pace.held[pace.pos..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            pace.pos += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Throttled<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if !this.paced() {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        }
        ready!(this.drain(cx))?;
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let n = data.len().min(SLICE);
        this.write.held.clear();
        this.write.held.extend_from_slice(&data[..n]);
        if (this.write).hold(this.rate, this.uplink.as_ref().map(|u| &*u.from_workers)) {
            // Due now: try to pass it on; what the socket refuses stays
            // held for the next write or flush.
            if let Poll::Ready(Err(e)) = this.drain(cx) {
                return Poll::Ready(Err(e));
            }
        }
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // Unthrottled, keep the socket's vectored write (header and payload
        // in one segment); throttled, slices are paced one by one anyway.
        if !self.paced() {
            return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        }
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]);
        self.poll_write(cx, first)
    }

    fn is_write_vectored(&self) -> bool {
        !self.paced() && self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Seconds from now until `n` bytes written by `w` have been read by `r`.
    async fn carry<A, B>(w: &mut A, r: &mut B, n: usize) -> f64
    where
        A: AsyncWrite + Unpin,
        B: AsyncRead + Unpin,
    {
        let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        let t0 = Instant::now();
        let writer = async {
            w.write_all(&data).await.expect("writes");
            w.flush().await.expect("flushes");
        };
        let reader = async {
            let mut got = vec![0u8; n];
            r.read_exact(&mut got).await.expect("reads");
            got
        };
        let ((), got) = tokio::join!(writer, reader);
        assert!(got == data, "bytes changed on the way");
        t0.elapsed().as_secs_f64()
    }

    /// Slack for a busy test machine: the property tested is "never
    /// faster than the rate"; the upper end only catches a pace gone wrong.
    const SLACK: f64 = 0.25;

    #[tokio::test]
    async fn each_side_keeps_the_rate() {
        // 20 MB/s: 2 MB take 0.1 s.
        for (w_rate, r_rate) in [(Some(2e7), None), (None, Some(2e7))] {
            let (a, b) = tokio::io::duplex(4 << 20);
            let (mut w, mut r) = (Throttled::new(a, w_rate), Throttled::new(b, r_rate));
            let t = carry(&mut w, &mut r, 2_000_000).await;
            assert!((0.1..=0.1 * (1.0 + SLACK)).contains(&t), "{w_rate:?}/{r_rate:?}: {t}");
        }
        // Both ends throttled: the reader pays for a slice once it arrived.
        let (a, b) = tokio::io::duplex(4 << 20);
        let (mut w, mut r) = (Throttled::new(a, Some(2e7)), Throttled::new(b, Some(2e7)));
        let t = carry(&mut w, &mut r, 2_000_000).await;
        let most = (0.1 + SLICE as f64 / 2e7) * (1.0 + SLACK);
        assert!((0.1..=most).contains(&t), "{t}");
    }

    #[tokio::test]
    async fn a_message_after_a_pause_pays_the_rate_from_its_first_byte() {
        // 100 MB/s: a 200 kB message takes 2 ms. After an idle spell the
        // link grants no burst, whether the pace sits on the writer or the
        // reader, and whether the message is one slice or several.
        for (w_rate, r_rate) in [(Some(1e8), None), (None, Some(1e8))] {
            let (a, b) = tokio::io::duplex(1 << 20);
            let (mut w, mut r) = (Throttled::new(a, w_rate), Throttled::new(b, r_rate));
            for n in [200_000, 30_000, 200_000, 1_000] {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                let t = carry(&mut w, &mut r, n).await;
                // A slice due within EARLY is released at once.
                let least = n as f64 / 1e8 - EARLY.as_secs_f64();
                assert!(t >= least, "{w_rate:?}/{r_rate:?}: {n} bytes in {t} s, under {least}");
                assert!(t <= least + 0.02, "{w_rate:?}/{r_rate:?}: {n} bytes in {t} s");
            }
        }
    }

    /// Seconds until two streams behind `uplink`, each 1 MB, have crossed:
    /// both sent by the master (`both_sent`), or one sent and one returned.
    async fn two_streams(uplink: Option<SharedUplink>, both_sent: bool) -> f64 {
        let n = 1_000_000;
        let data = vec![7u8; n];
        let (a1, b1) = tokio::io::duplex(4 << 20);
        let (a2, b2) = tokio::io::duplex(4 << 20);
        // The worker's end is the throttled one: it reads what the master
        // sends, writes what returns.
        let mut w1 = Throttled::new(b1, None).behind(uplink.clone());
        let mut w2 = Throttled::new(b2, None).behind(uplink);
        let (mut m1, mut m2) = (a1, a2);
        async fn cross<A: AsyncWrite + Unpin, B: AsyncRead + Unpin>(w: &mut A, r: &mut B, data: &[u8]) {
            let mut got = vec![0u8; data.len()];
            let writer = async {
                w.write_all(data).await.expect("writes");
                w.flush().await.expect("flushes");
            };
            let ((), read) = tokio::join!(writer, r.read_exact(&mut got));
            read.expect("reads");
        }
        let t0 = Instant::now();
        if both_sent {
            tokio::join!(cross(&mut m1, &mut w1, &data), cross(&mut m2, &mut w2, &data));
        } else {
            tokio::join!(cross(&mut m1, &mut w1, &data), cross(&mut w2, &mut m2, &data));
        }
        t0.elapsed().as_secs_f64()
    }

    #[tokio::test]
    async fn an_uplink_is_shared_by_the_links_behind_it() {
        // 20 MB/s: 1 MB alone takes 0.05 s; two at once share the rate.
        let full = SharedUplink::new(2e7, true);
        let half = SharedUplink::new(2e7, false);
        let shared_sends = two_streams(full.clone(), true).await;
        assert!((0.1..=0.1 * (1.0 + SLACK)).contains(&shared_sends), "{shared_sends}");
        // Full duplex: a send and a return do not wait for each other.
        let duplex = two_streams(full, false).await;
        assert!((0.05..=0.05 * (1.0 + SLACK)).contains(&duplex), "{duplex}");
        // Half duplex: they share one capacity.
        let one_way = two_streams(half, false).await;
        assert!((0.1..=0.1 * (1.0 + SLACK)).contains(&one_way), "{one_way}");
        assert!(SharedUplink::new(0.0, true).is_none() && SharedUplink::new(f64::NAN, false).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn no_rate_is_no_delay() {
        let (a, b) = tokio::io::duplex(1 << 20);
        let mut w = Throttled::new(a, None);
        let mut r = Throttled::new(b, Some(f64::NAN));
        let t0 = tokio::time::Instant::now();
        w.write_all(&[1u8; 100_000]).await.expect("writes");
        let mut got = vec![0u8; 100_000];
        r.read_exact(&mut got).await.expect("reads");
        assert_eq!(t0.elapsed().as_secs_f64(), 0.0);
    }
}
