//! Link-rate emulation (`--link-rate`): a stream wrapper that spaces reads
//! and writes so that, on average, they move no more than `rate` bytes per
//! second. Emulation only, as the report does to make identical nodes look
//! heterogeneous; off by default.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// At most this many bytes move between two checks of the pace.
const SLICE: usize = 64 * 1024;

/// Pause only once the link is this far behind: tokio's timer has a
/// resolution of a millisecond, so pausing after every slice would cap the
/// rate near one slice per millisecond whatever was asked.
const MIN_PAUSE: Duration = Duration::from_millis(1);

/// Credit kept after an over-long pause, so that the timer's overshoot does
/// not lower the average rate.
const CREDIT: Duration = Duration::from_millis(1);

#[derive(Default)]
struct Pace {
    next_free: Option<Instant>,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl Pace {
    fn wait(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(s) = &mut self.sleep {
            ready!(s.as_mut().poll(cx));
            self.sleep = None;
        }
        Poll::Ready(())
    }

    /// Account for `n` bytes just moved; once the link is more than
    /// `MIN_PAUSE` behind, the next operation waits until it would have
    /// carried them.
    fn charge(&mut self, n: usize, rate: f64) {
        let now = Instant::now();
        let floor = now.checked_sub(CREDIT).unwrap_or(now);
        let start = self.next_free.map_or(now, |t| t.max(floor));
        let next = start + Duration::from_secs_f64(n as f64 / rate);
        self.next_free = Some(next);
        if next > now + MIN_PAUSE {
            self.sleep = Some(Box::pin(tokio::time::sleep_until(next)));
        }
    }
}

/// A stream, optionally throttled to `rate` bytes per second each way.
pub struct Throttled<S> {
    inner: S,
    rate: Option<f64>,
    read: Pace,
    write: Pace,
}

impl<S> Throttled<S> {
    /// `rate`: bytes per second, or `None` for no limit.
    pub fn new(inner: S, rate: Option<f64>) -> Self {
        Throttled {
            inner,
            rate: rate.filter(|r| r.is_finite() && *r > 0.0),
            read: Pace::default(),
            write: Pace::default(),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Throttled<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let Some(rate) = this.rate else {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        };
        ready!(this.read.wait(cx));
        let max = buf.remaining().min(SLICE);
        let dst = buf.initialize_unfilled_to(max);
        let mut sub = ReadBuf::new(dst);
        ready!(Pin::new(&mut this.inner).poll_read(cx, &mut sub))?;
        let n = sub.filled().len();
        buf.advance(n);
        this.read.charge(n, rate);
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Throttled<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let Some(rate) = this.rate else {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        };
        ready!(this.write.wait(cx));
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &data[..data.len().min(SLICE)]))?;
        this.write.charge(n, rate);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        // Unthrottled, keep the socket's vectored write (header and payload
        // in one segment); throttled, slices are paced one by one anyway.
        if self.rate.is_none() {
            return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        }
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]);
        self.poll_write(cx, first)
    }

    fn is_write_vectored(&self) -> bool {
        self.rate.is_none() && self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn reads_and_writes_follow_the_rate() {
        let (a, b) = tokio::io::duplex(1 << 20);
        // 1 MB/s: 500 kB take half a second each way (paused clock: exact).
        let mut w = Throttled::new(a, Some(1e6));
        let mut r = Throttled::new(b, Some(1e6));
        let data = vec![7u8; 500_000];
        let t0 = Instant::now();
        let writer = async {
            w.write_all(&data).await.expect("writes");
            w.flush().await.expect("flushes");
            t0.elapsed()
        };
        let reader = async {
            let mut got = vec![0u8; data.len()];
            r.read_exact(&mut got).await.expect("reads");
            (got, t0.elapsed())
        };
        let (tw, (got, tr)) = tokio::join!(writer, reader);
        assert_eq!(got, data);
        // Pauses come after the bytes they pay for, and only once the link
        // is MIN_PAUSE behind: the clock reads at least
        // (bytes − one slice) / rate − MIN_PAUSE.
        let floor = (500_000 - SLICE) as f64 / 1e6 - MIN_PAUSE.as_secs_f64();
        assert!(tw.as_secs_f64() >= floor && tw.as_secs_f64() <= 0.51, "{tw:?}");
        assert!(tr.as_secs_f64() >= floor && tr.as_secs_f64() <= 0.51, "{tr:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn no_rate_is_no_delay() {
        let (a, b) = tokio::io::duplex(1 << 20);
        let mut w = Throttled::new(a, None);
        let mut r = Throttled::new(b, Some(f64::NAN));
        let t0 = Instant::now();
        w.write_all(&[1u8; 100_000]).await.expect("writes");
        let mut got = vec![0u8; 100_000];
        r.read_exact(&mut got).await.expect("reads");
        assert_eq!(t0.elapsed().as_secs_f64(), 0.0);
    }
}
