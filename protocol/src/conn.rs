//! `Connection`: the one owner of a stream's bytes. It keeps the read
//! buffer and any half-read frame, so `read_frame` is cancel-safe (use it in
//! `select!`), and it writes payloads straight from the caller's slices.
//! It never opens a socket and never spawns: callers hand it a stream.
//! Once [`Connection::seal_with`] is called, every frame is encrypted and
//! authenticated ([`crate::seal`]).

use crate::error::{Error, Result};
use crate::frame::{self, HANDSHAKE_MAX_FRAME};
use crate::message::{Frame, Payload};
use crate::seal::{Sealer, RECORD, TAG};
use crate::values::Values;
use bytes::{Buf, BytesMut};
use serde::{de::DeserializeOwned, Serialize};
use std::io::IoSlice;
use std::marker::PhantomData;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

struct Partial<M> {
    msg: M,
    payload: Values,
    filled: usize,
    /// Sealed connections: payload bytes already opened (whole records).
    opened: usize,
}

/// Where a frame's payload is read into: a buffer of the payload's type
/// and length (its values about to be overwritten), or `None` for fresh
/// zeros. A daemon hands out the memory of inputs it has computed, so
/// that large payloads are not mapped and zeroed anew each time.
pub type PayloadSource = std::sync::Arc<dyn Fn(crate::DType, usize) -> Option<Values> + Send + Sync>;

impl<M> Partial<M> {
    /// A frame of this head, its payload still to come (read into what
    /// `source` gives, where it gives one of the right type and length).
    fn of(head: frame::Head<M>, source: Option<&PayloadSource>) -> Partial<M> {
        let given = source
            .and_then(|s| s(head.dtype, head.values))
            .filter(|v| v.dtype() == head.dtype && v.len() == head.values);
        Partial {
            msg: head.msg,
            payload: given.unwrap_or_else(|| Values::zeros(head.dtype, head.values)),
            filled: 0,
            opened: 0,
        }
    }
}

/// A framed, typed connection: reads `In`, writes `Out`.
pub struct Connection<S, In, Out> {
    stream: S,
    rbuf: BytesMut,
    wbuf: Vec<u8>,
    max_frame: u64,
    partial: Option<Partial<In>>,
    /// Bytes read so far: a sign of life even in the middle of a long frame.
    bytes_in: u64,
    /// Longest a single write may make no progress before it fails.
    write_stall: Option<std::time::Duration>,
    /// Encrypted connections: the sealer of what is written, and of what
    /// is read.
    seal_out: Option<Sealer>,
    seal_in: Option<Sealer>,
    /// Where payloads are read into (`None`: fresh zeros).
    payloads: Option<PayloadSource>,
    _out: PhantomData<fn(Out)>,
}

/// The half of a connection that reads, after [`Connection::split`].
pub type ReadingHalf<S, In, Out> = Connection<tokio::io::ReadHalf<S>, In, Out>;
/// The half of a connection that writes, after [`Connection::split`].
pub type WritingHalf<S, In, Out> = Connection<tokio::io::WriteHalf<S>, In, Out>;

/// Write `slices` one after the other in vectored writes, each of which
/// must make progress within `stall` (if set).
async fn write_slices<S: AsyncWrite + Unpin>(
    stream: &mut S,
    stall: Option<std::time::Duration>,
    slices: &[&[u8]],
) -> Result<()> {
    let mut first = 0;
    let mut offset = 0;
    while first < slices.len() {
        let io: Vec<IoSlice<'_>> = std::iter::once(IoSlice::new(&slices[first][offset..]))
            .chain(slices[first + 1..].iter().take(63).map(|s| IoSlice::new(s)))
            .collect();
        let mut n = match stall {
            None => stream.write_vectored(&io).await?,
            Some(d) => tokio::time::timeout(d, stream.write_vectored(&io))
                .await
                .map_err(|_| Error::Timeout(d, "the peer to take more bytes"))??,
        };
        if n == 0 && !io.iter().all(|s| s.is_empty()) {
            return Err(Error::Io(std::io::ErrorKind::WriteZero.into()));
        }
        if n == 0 {
            break;
        }
        while n > 0 {
            let left = slices[first].len() - offset;
            if n >= left {
                n -= left;
                first += 1;
                offset = 0;
            } else {
                offset += n;
                n = 0;
            }
        }
    }
    stream.flush().await?;
    Ok(())
}

impl<S, In, Out> Connection<S, In, Out> {
    /// A connection whose frames are limited to `HANDSHAKE_MAX_FRAME` until
    /// `set_max_frame` raises it.
    pub fn new(stream: S) -> Self {
        Connection {
            stream,
            rbuf: BytesMut::with_capacity(16 * 1024),
            wbuf: Vec::with_capacity(256),
            max_frame: HANDSHAKE_MAX_FRAME,
            partial: None,
            bytes_in: 0,
            write_stall: None,
            seal_out: None,
            seal_in: None,
            payloads: None,
            _out: PhantomData,
        }
    }

    pub fn set_max_frame(&mut self, max: u64) {
        self.max_frame = max.min(frame::ABSOLUTE_MAX_FRAME);
    }

    /// Read payloads into what `source` gives (see [`PayloadSource`]).
    pub fn set_payload_source(&mut self, source: PayloadSource) {
        self.payloads = Some(source);
    }

    pub fn max_frame(&self) -> u64 {
        self.max_frame
    }

    /// Bytes read from the stream so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_in
    }

    /// Fail a write that makes no progress for `d` (a stalled peer), instead
    /// of waiting forever. `None`: wait as long as it takes.
    pub fn set_write_stall_timeout(&mut self, d: Option<std::time::Duration>) {
        self.write_stall = d;
    }

    /// Encrypt and authenticate every frame from now on, both ways (the
    /// handshake's last frame has just been sent or read).
    pub fn seal_with(&mut self, send: Sealer, recv: Sealer) {
        (self.seal_out, self.seal_in) = (Some(send), Some(recv));
    }

    /// Whether frames are encrypted (either way, for a half).
    pub fn is_sealed(&self) -> bool {
        self.seal_out.is_some() || self.seal_in.is_some()
    }

    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    pub fn get_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// The two halves of the connection, so that one task may read while
    /// another writes (a worker's results coming in while its next chunk
    /// goes out): the reading half keeps what was read and the receiving
    /// sealer, the writing half the sending one.
    pub fn split(self) -> (ReadingHalf<S, In, Out>, WritingHalf<S, In, Out>)
    where
        S: AsyncRead + AsyncWrite,
    {
        let (r, w) = tokio::io::split(self.stream);
        let reading = Connection {
            stream: r,
            rbuf: self.rbuf,
            wbuf: Vec::new(),
            max_frame: self.max_frame,
            partial: self.partial,
            bytes_in: self.bytes_in,
            write_stall: None,
            seal_out: None,
            seal_in: self.seal_in,
            payloads: self.payloads.clone(),
            _out: PhantomData,
        };
        let writing = Connection {
            stream: w,
            rbuf: BytesMut::new(),
            wbuf: self.wbuf,
            max_frame: self.max_frame,
            partial: None,
            bytes_in: 0,
            write_stall: self.write_stall,
            seal_out: self.seal_out,
            seal_in: None,
            payloads: None,
            _out: PhantomData,
        };
        (reading, writing)
    }

    /// The connection the two halves of [`Connection::split`] came from.
    pub fn unsplit(reading: ReadingHalf<S, In, Out>, writing: WritingHalf<S, In, Out>) -> Self
    where
        S: Unpin,
    {
        Connection {
            stream: reading.stream.unsplit(writing.stream),
            rbuf: reading.rbuf,
            wbuf: writing.wbuf,
            max_frame: reading.max_frame,
            partial: reading.partial,
            bytes_in: reading.bytes_in,
            write_stall: writing.write_stall,
            seal_out: writing.seal_out,
            seal_in: reading.seal_in,
            payloads: reading.payloads,
            _out: PhantomData,
        }
    }
}

/// A connection lent out in two halves ([`Connection::lend`]), so that one
/// may read while the other writes without giving the connection up. When
/// it is dropped (also in the middle of a transfer) what the halves read
/// and their sealers' counts go back to the connection.
pub struct Lent<'a, S, In, Out> {
    pub reading: Connection<tokio::io::ReadHalf<&'a mut S>, In, Out>,
    pub writing: Connection<tokio::io::WriteHalf<&'a mut S>, In, Out>,
    home: Home<'a, In>,
}

/// Where a lent connection's state goes back to.
struct Home<'a, In> {
    rbuf: &'a mut BytesMut,
    wbuf: &'a mut Vec<u8>,
    partial: &'a mut Option<Partial<In>>,
    bytes_in: &'a mut u64,
    seal_in: &'a mut Option<Sealer>,
    seal_out: &'a mut Option<Sealer>,
}

impl<S: AsyncRead + AsyncWrite + Unpin, In, Out> Connection<S, In, Out> {
    /// The two halves of this connection (as [`Connection::split`] makes
    /// them), for as long as the [`Lent`] lives.
    pub fn lend(&mut self) -> Lent<'_, S, In, Out> {
        let Connection {
            stream,
            rbuf,
            wbuf,
            max_frame,
            partial,
            bytes_in,
            write_stall,
            seal_out,
            seal_in,
            payloads,
            _out,
        } = self;
        let (r, w) = tokio::io::split(stream);
        Lent {
            reading: Connection {
                stream: r,
                rbuf: std::mem::take(rbuf),
                wbuf: Vec::new(),
                max_frame: *max_frame,
                partial: partial.take(),
                bytes_in: *bytes_in,
                write_stall: None,
                seal_out: None,
                seal_in: seal_in.take(),
                payloads: payloads.clone(),
                _out: PhantomData,
            },
            writing: Connection {
                stream: w,
                rbuf: BytesMut::new(),
                wbuf: std::mem::take(wbuf),
                max_frame: *max_frame,
                partial: None,
                bytes_in: 0,
                write_stall: *write_stall,
                seal_out: seal_out.take(),
                seal_in: None,
                payloads: None,
                _out: PhantomData,
            },
            home: Home {
                rbuf,
                wbuf,
                partial,
                bytes_in,
                seal_in,
                seal_out,
            },
        }
    }
}

impl<S, In, Out> Drop for Lent<'_, S, In, Out> {
    fn drop(&mut self) {
        let (r, w, home) = (&mut self.reading, &mut self.writing, &mut self.home);
        *home.rbuf = std::mem::take(&mut r.rbuf);
        *home.partial = r.partial.take();
        *home.bytes_in = r.bytes_in;
        *home.seal_in = r.seal_in.take();
        *home.wbuf = std::mem::take(&mut w.wbuf);
        *home.seal_out = w.seal_out.take();
    }
}

/// Reading frames.
impl<S, In, Out> Connection<S, In, Out>
where
    S: AsyncRead + Unpin,
    In: DeserializeOwned + Payload,
{
    /// Read the next frame. `Ok(None)`: the peer closed cleanly between frames.
    pub async fn read_frame(&mut self) -> Result<Option<Frame<In>>> {
        self.read_frame_checked(|_| Ok(())).await
    }

    /// Like `read_frame`, but `check` sees every message before its payload
    /// is allocated and may refuse it.
    pub async fn read_frame_checked(&mut self, mut check: impl FnMut(&In) -> Result<()>) -> Result<Option<Frame<In>>> {
        if self.seal_in.is_some() {
            return self.read_sealed(check).await;
        }
        loop {
            if self.partial.is_some() {
                self.fill_payload().await?;
                return Ok(self.complete());
            }
            if let Some(head) = frame::parse_head::<In>(&self.rbuf, self.max_frame)? {
                check(&head.msg)?;
                self.rbuf.advance(head.head_bytes);
                self.partial = Some(Partial::of(head, self.payloads.as_ref()));
                continue;
            }
            if !self.fill().await? {
                return self.closed();
            }
        }
    }

    /// The frame whose payload is all in, in host byte order.
    fn complete(&mut self) -> Option<Frame<In>> {
        let mut done = self.partial.take()?;
        done.payload.le_to_host();
        Some(Frame {
            msg: done.msg,
            payload: done.payload,
        })
    }

    /// Fill the payload of the frame being read, from the read buffer first,
    /// then straight from the stream (never past the payload). Cancel-safe:
    /// what was read stays in `partial`.
    async fn fill_payload(&mut self) -> Result<()> {
        self.fill_payload_to(usize::MAX).await
    }

    /// As [`Connection::fill_payload`], up to byte `limit` of the payload
    /// (a sealed record's end: its tag follows in the stream).
    async fn fill_payload_to(&mut self, limit: usize) -> Result<()> {
        let Some(p) = &mut self.partial else { return Ok(()) };
        let all: &mut [u8] = p.payload.as_bytes_mut();
        let end = limit.min(all.len());
        let bytes = &mut all[..end];
        if p.filled < bytes.len() && !self.rbuf.is_empty() {
            let n = self.rbuf.len().min(bytes.len() - p.filled);
            bytes[p.filled..p.filled + n].copy_from_slice(&self.rbuf[..n]);
            self.rbuf.advance(n);
            p.filled += n;
        }
        while p.filled < bytes.len() {
            let n = self.stream.read(&mut bytes[p.filled..]).await?;
            self.bytes_in += n as u64;
            if n == 0 {
                return Err(Error::Truncated {
                    got: p.filled,
                    expected: bytes.len(),
                });
            }
            p.filled += n;
        }
        Ok(())
    }

    /// The peer closed: cleanly between frames, or in the middle of one.
    fn closed(&self) -> Result<Option<Frame<In>>> {
        if self.rbuf.is_empty() {
            Ok(None)
        } else {
            Err(Error::Truncated {
                got: self.rbuf.len(),
                expected: self.rbuf.len() + 1,
            })
        }
    }

    /// Read more bytes into the read buffer. `Ok(false)`: the peer closed.
    async fn fill(&mut self) -> Result<bool> {
        if self.rbuf.capacity() - self.rbuf.len() < 4096 {
            self.rbuf.reserve(16 * 1024);
        }
        let n = self.stream.read_buf(&mut self.rbuf).await?;
        self.bytes_in += n as u64;
        Ok(n > 0)
    }

    /// `read_frame_checked` on an encrypted connection: the header record
    /// is opened and checked before the payload is allocated; the payload
    /// is read in place, then opened with its tag.
    async fn read_sealed(&mut self, mut check: impl FnMut(&In) -> Result<()>) -> Result<Option<Frame<In>>> {
        loop {
            if let Some(p) = &self.partial {
                // The payload, record by record: each is opened as soon as
                // it and its tag are in, while the next is on its way.
                let total = p.payload.as_bytes().len();
                if p.opened == total {
                    return Ok(self.complete());
                }
                let end = (p.opened + RECORD).min(total);
                self.fill_payload_to(end).await?;
                if self.rbuf.len() < TAG {
                    if !self.fill().await? {
                        return Err(Error::Truncated {
                            got: self.rbuf.len(),
                            expected: TAG,
                        });
                    }
                    continue;
                }
                let mut tag = [0u8; TAG];
                tag.copy_from_slice(&self.rbuf[..TAG]);
                self.rbuf.advance(TAG);
                if let (Some(c), Some(p)) = (&mut self.seal_in, &mut self.partial) {
                    let start = p.opened;
                    c.open(&mut p.payload.as_bytes_mut()[start..end], &tag)?;
                    p.opened = end;
                }
                continue;
            }
            // The header record: length, ciphertext, tag.
            if self.rbuf.len() >= 4 {
                let len = u32::from_le_bytes([self.rbuf[0], self.rbuf[1], self.rbuf[2], self.rbuf[3]]) as usize;
                if len > frame::MAX_HEAD + 8 {
                    return Err(Error::Malformed(format!("sealed header of {len} bytes")));
                }
                if self.rbuf.len() >= 4 + len + TAG {
                    let mut plain = self.rbuf[4..4 + len].to_vec();
                    let mut tag = [0u8; TAG];
                    tag.copy_from_slice(&self.rbuf[4 + len..4 + len + TAG]);
                    self.rbuf.advance(4 + len + TAG);
                    if let Some(c) = &mut self.seal_in {
                        c.open(&mut plain, &tag)?;
                    }
                    let head = match frame::parse_head::<In>(&plain, self.max_frame)? {
                        Some(h) if h.head_bytes == plain.len() => h,
                        _ => return Err(Error::Malformed("a sealed header that is not one whole header".into())),
                    };
                    check(&head.msg)?;
                    if head.values == 0 {
                        return Ok(Some(Frame {
                            msg: head.msg,
                            payload: Values::default(),
                        }));
                    }
                    self.partial = Some(Partial::of(head, self.payloads.as_ref()));
                    continue;
                }
            }
            if !self.fill().await? {
                return self.closed();
            }
        }
    }
}

/// Writing frames.
impl<S, In, Out> Connection<S, In, Out>
where
    S: AsyncWrite + Unpin,
    Out: Serialize + Payload,
{
    /// Write a message with its payload, and flush.
    pub async fn write_frame(&mut self, msg: &Out, payload: &Values) -> Result<()> {
        let (dtype, expected) = msg.payload()?;
        if expected > 0 && payload.dtype() != dtype {
            return Err(Error::PayloadMismatch {
                got: payload.len() as u64,
                expected,
            });
        }
        let bytes = payload.le_bytes();
        self.write_frame_parts(msg, &[&bytes]).await
    }

    /// Write a message whose payload is the concatenation of `parts`,
    /// little-endian bytes of the message's type (A and B ranges of a
    /// batch, say), without copying them, and flush.
    pub async fn write_frame_parts(&mut self, msg: &Out, parts: &[&[u8]]) -> Result<()> {
        let bytes: usize = parts.iter().map(|p| p.len()).sum();
        let (dtype, expected) = msg.payload()?;
        if expected.checked_mul(dtype.size()) != Some(bytes as u64) {
            return Err(Error::PayloadMismatch {
                got: bytes as u64 / dtype.size(),
                expected,
            });
        }
        self.wbuf.clear();
        frame::encode_head(msg, bytes as u64, &mut self.wbuf)?;
        let bodies: Vec<&[u8]> = parts.iter().filter(|p| !p.is_empty()).copied().collect();
        if let Some(c) = &mut self.seal_out {
            // Sealed: the header record, then the payload in records of at
            // most RECORD bytes, each copied once to be encrypted in place
            // and written with its tag while the peer opens the last.
            let len = (self.wbuf.len() as u32).to_le_bytes();
            let tag = c.seal(&mut self.wbuf)?;
            write_slices(&mut self.stream, self.write_stall, &[&len, &self.wbuf, &tag]).await?;
            let mut record: Vec<u8> = Vec::with_capacity(RECORD.min(bytes));
            // (part, offset in it) of the next payload byte.
            let (mut part, mut at) = (0, 0);
            while part < bodies.len() {
                record.clear();
                while part < bodies.len() && record.len() < RECORD {
                    let take = (bodies[part].len() - at).min(RECORD - record.len());
                    record.extend_from_slice(&bodies[part][at..at + take]);
                    at += take;
                    if at == bodies[part].len() {
                        (part, at) = (part + 1, 0);
                    }
                }
                let tag = c.seal(&mut record)?;
                write_slices(&mut self.stream, self.write_stall, &[&record, &tag]).await?;
            }
            return Ok(());
        }
        // Header and payload leave in vectored writes: a separate tiny header
        // segment costs about a tenth of loopback throughput.
        let mut slices: Vec<&[u8]> = Vec::with_capacity(1 + bodies.len());
        slices.push(&self.wbuf);
        slices.extend(bodies.iter().copied());
        write_slices(&mut self.stream, self.write_stall, &slices).await
    }

    /// Write a message without payload.
    pub async fn send(&mut self, msg: &Out) -> Result<()> {
        self.write_frame_parts(msg, &[]).await
    }

    /// Write raw bytes (tests of bad input only).
    pub async fn write_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await?;
        Ok(())
    }

    /// Close the write side.
    pub async fn shutdown(&mut self) -> Result<()> {
        self.stream.shutdown().await?;
        Ok(())
    }
}
