//! `Connection`: the one owner of a stream's bytes. It keeps the read
//! buffer and any half-read frame, so `read_frame` is cancel-safe (use it in
//! `select!`), and it writes payloads straight from the caller's slice.
//! It never opens a socket and never spawns: callers hand it a stream.

use crate::error::{Error, Result};
use crate::frame::{self, HANDSHAKE_MAX_FRAME};
use crate::message::{Frame, Payload};
use bytes::{Buf, BytesMut};
use serde::{de::DeserializeOwned, Serialize};
use std::io::IoSlice;
use std::marker::PhantomData;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

struct Partial<M> {
    msg: M,
    payload: Vec<f64>,
    filled: usize,
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
    _out: PhantomData<fn(Out)>,
}

impl<S, In, Out> Connection<S, In, Out>
where
    S: AsyncRead + AsyncWrite + Unpin,
    In: DeserializeOwned + Payload,
    Out: Serialize + Payload,
{
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
            _out: PhantomData,
        }
    }

    pub fn set_max_frame(&mut self, max: u64) {
        self.max_frame = max.min(frame::ABSOLUTE_MAX_FRAME);
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

    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    pub fn get_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// Read the next frame. `Ok(None)`: the peer closed cleanly between frames.
    pub async fn read_frame(&mut self) -> Result<Option<Frame<In>>> {
        self.read_frame_checked(|_| Ok(())).await
    }

    /// Like `read_frame`, but `check` sees every message before its payload
    /// is allocated and may refuse it.
    pub async fn read_frame_checked(&mut self, mut check: impl FnMut(&In) -> Result<()>) -> Result<Option<Frame<In>>> {
        loop {
            if let Some(p) = &mut self.partial {
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut p.payload);
                if p.filled < bytes.len() && !self.rbuf.is_empty() {
                    let n = self.rbuf.len().min(bytes.len() - p.filled);
                    bytes[p.filled..p.filled + n].copy_from_slice(&self.rbuf[..n]);
                    self.rbuf.advance(n);
                    p.filled += n;
                }
                if p.filled == bytes.len() {
                    let Some(mut done) = self.partial.take() else {
                        unreachable!("partial frame checked above")
                    };
                    frame::payload_to_host(&mut done.payload);
                    return Ok(Some(Frame {
                        msg: done.msg,
                        payload: done.payload,
                    }));
                }
                let n = self.stream.read(&mut bytes[p.filled..]).await?;
                self.bytes_in += n as u64;
                if n == 0 {
                    return Err(Error::Truncated {
                        got: p.filled,
                        expected: bytes.len(),
                    });
                }
                p.filled += n;
                continue;
            }
            if let Some(head) = frame::parse_head::<In>(&self.rbuf, self.max_frame)? {
                check(&head.msg)?;
                self.rbuf.advance(head.head_bytes);
                self.partial = Some(Partial {
                    msg: head.msg,
                    payload: vec![0.0; head.values],
                    filled: 0,
                });
                continue;
            }
            if self.rbuf.capacity() - self.rbuf.len() < 4096 {
                self.rbuf.reserve(16 * 1024);
            }
            let n = self.stream.read_buf(&mut self.rbuf).await?;
            self.bytes_in += n as u64;
            if n == 0 {
                return if self.rbuf.is_empty() {
                    Ok(None)
                } else {
                    Err(Error::Truncated {
                        got: self.rbuf.len(),
                        expected: self.rbuf.len() + 1,
                    })
                };
            }
        }
    }

    /// Write a message with its payload, and flush.
    pub async fn write_frame(&mut self, msg: &Out, payload: &[f64]) -> Result<()> {
        self.write_frame_parts(msg, &[payload]).await
    }

    /// Write a message whose payload is the concatenation of `parts` (A and
    /// B ranges of a batch, say), without copying them, and flush.
    pub async fn write_frame_parts(&mut self, msg: &Out, parts: &[&[f64]]) -> Result<()> {
        let values: usize = parts.iter().map(|p| p.len()).sum();
        let expected = msg.payload_len()?;
        if expected != values as u64 {
            return Err(Error::PayloadMismatch {
                got: values as u64,
                expected,
            });
        }
        self.wbuf.clear();
        frame::encode_head(msg, values, &mut self.wbuf)?;
        let bodies: Vec<_> = parts
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| frame::payload_bytes(p))
            .collect();
        // Header and payload leave in vectored writes: a separate tiny header
        // segment costs about a tenth of loopback throughput.
        let mut slices: Vec<&[u8]> = Vec::with_capacity(1 + bodies.len());
        slices.push(&self.wbuf);
        slices.extend(bodies.iter().map(|b| &b[..]));
        let mut first = 0;
        let mut offset = 0;
        while first < slices.len() {
            let io: Vec<IoSlice<'_>> = std::iter::once(IoSlice::new(&slices[first][offset..]))
                .chain(slices[first + 1..].iter().take(63).map(|s| IoSlice::new(s)))
                .collect();
            let mut n = match self.write_stall {
                None => self.stream.write_vectored(&io).await?,
                Some(d) => tokio::time::timeout(d, self.stream.write_vectored(&io))
                    .await
                    .map_err(|_| Error::Timeout(d, "the peer to take more bytes"))??,
            };
            if n == 0 {
                return Err(Error::Io(std::io::ErrorKind::WriteZero.into()));
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
        self.stream.flush().await?;
        Ok(())
    }

    /// Write a message without payload.
    pub async fn send(&mut self, msg: &Out) -> Result<()> {
        self.write_frame(msg, &[]).await
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
