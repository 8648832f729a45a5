//! Framing, synchronous and socket-free.
//!
//! ```text
//! u32 LE  body_len   = 4 + head_len + 8 · values
//! u32 LE  head_len   (at most MAX_HEAD)
//! head    bincode (standard config) of the message
//! payload values × f64 LE, as many as the message implies
//! ```
//! `body_len` is checked against the connection's limit before anything is
//! allocated; the payload length is checked against the message.

use crate::error::{Error, Result};
use crate::message::{Frame, Payload};
use bytes::{Buf, BufMut, BytesMut};
use serde::{de::DeserializeOwned, Serialize};

/// Largest encoded message header.
pub const MAX_HEAD: usize = 64 * 1024;

/// Frame limit before the handshake has negotiated one.
pub const HANDSHAKE_MAX_FRAME: u64 = 64 * 1024;

/// Largest frame the format can carry (u32 length prefix).
pub const ABSOLUTE_MAX_FRAME: u64 = u32::MAX as u64;

const PREFIX: usize = 8;

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MAX_HEAD>()
}

/// A parsed header: the message, the bytes it took, and the payload's size.
#[derive(Debug)]
pub struct Head<M> {
    pub msg: M,
    /// Bytes before the payload (prefix and encoded message).
    pub head_bytes: usize,
    /// Number of f64 values that follow.
    pub values: usize,
}

/// Parse a frame header from the start of `buf`. `Ok(None)`: not enough bytes
/// yet. `Err`: these bytes can never become a valid frame.
pub fn parse_head<M: DeserializeOwned + Payload>(buf: &[u8], max_frame: u64) -> Result<Option<Head<M>>> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let body_len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as u64;
    if body_len > max_frame {
        return Err(Error::FrameTooLarge {
            len: body_len,
            max: max_frame,
        });
    }
    if body_len < 4 {
        return Err(Error::Malformed(format!(
            "body length {body_len} is shorter than its own header"
        )));
    }
    if buf.len() < PREFIX {
        return Ok(None);
    }
    let head_len = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
    if head_len == 0 || head_len > MAX_HEAD || head_len as u64 > body_len - 4 {
        return Err(Error::Malformed(format!("header length {head_len} (body {body_len})")));
    }
    if buf.len() < PREFIX + head_len {
        return Ok(None);
    }
    let (msg, used): (M, usize) = bincode::serde::decode_from_slice(&buf[PREFIX..PREFIX + head_len], config())
        .map_err(|e| Error::Malformed(format!("undecodable message: {e}")))?;
    if used != head_len {
        return Err(Error::Malformed(format!(
            "message uses {used} of {head_len} header bytes"
        )));
    }
    let payload_bytes = body_len - 4 - head_len as u64;
    let expected = msg.payload_len()?;
    if !payload_bytes.is_multiple_of(8) || payload_bytes / 8 != expected {
        return Err(Error::PayloadMismatch {
            got: payload_bytes / 8,
            expected,
        });
    }
    Ok(Some(Head {
        msg,
        head_bytes: PREFIX + head_len,
        values: expected as usize,
    }))
}

/// Encode the prefix and header of a frame carrying `values` f64s.
pub fn encode_head<M: Serialize>(msg: &M, values: usize, out: &mut Vec<u8>) -> Result<()> {
    let head = bincode::serde::encode_to_vec(msg, config()).map_err(|e| Error::Malformed(format!("encoding: {e}")))?;
    let body_len = 4 + head.len() as u64 + 8 * values as u64;
    if body_len > ABSOLUTE_MAX_FRAME {
        return Err(Error::FrameTooLarge {
            len: body_len,
            max: ABSOLUTE_MAX_FRAME,
        });
    }
    out.extend_from_slice(&(body_len as u32).to_le_bytes());
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(&head);
    Ok(())
}

/// Raw little-endian bytes of a payload: a view where the host is little-endian.
pub fn payload_bytes(values: &[f64]) -> std::borrow::Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        std::borrow::Cow::Borrowed(bytemuck::cast_slice(values))
    } else {
        std::borrow::Cow::Owned(values.iter().flat_map(|v| v.to_le_bytes()).collect())
    }
}

/// Turn little-endian payload bytes, already in place in `values`, into host order.
pub fn payload_to_host(values: &mut [f64]) {
    if cfg!(target_endian = "big") {
        for v in values {
            *v = f64::from_le_bytes(v.to_ne_bytes());
        }
    }
}

/// Encode a whole frame into `out` (tests, fuzzing, small messages).
pub fn encode<M: Serialize + Payload>(frame: &Frame<M>, out: &mut BytesMut) -> Result<()> {
    let expected = frame.msg.payload_len()?;
    if expected != frame.payload.len() as u64 {
        return Err(Error::PayloadMismatch {
            got: frame.payload.len() as u64,
            expected,
        });
    }
    let mut head = Vec::new();
    encode_head(&frame.msg, frame.payload.len(), &mut head)?;
    out.put_slice(&head);
    out.put_slice(&payload_bytes(&frame.payload));
    Ok(())
}

/// Decode one whole frame from the front of `buf`, consuming it. `Ok(None)`:
/// not enough bytes yet (nothing consumed).
pub fn decode<M: DeserializeOwned + Payload>(buf: &mut BytesMut, max_frame: u64) -> Result<Option<Frame<M>>> {
    let Some(head) = parse_head::<M>(buf, max_frame)? else {
        return Ok(None);
    };
    let total = head.head_bytes + 8 * head.values;
    if buf.len() < total {
        return Ok(None);
    }
    buf.advance(head.head_bytes);
    let mut payload = vec![0.0f64; head.values];
    bytemuck::cast_slice_mut::<f64, u8>(&mut payload).copy_from_slice(&buf[..8 * head.values]);
    payload_to_host(&mut payload);
    buf.advance(8 * head.values);
    Ok(Some(Frame { msg: head.msg, payload }))
}

/// Feed `data` to the decoders of both directions under a few frame limits,
/// decoding frame after frame until the bytes run out or turn invalid, and
/// re-encode what decodes. The fuzz target and the corpus test call this.
pub fn exercise_decoder(data: &[u8]) {
    use crate::message::{FromWorker, ToWorker};
    fn run<M: DeserializeOwned + Serialize + Payload>(data: &[u8], max: u64) {
        let mut buf = BytesMut::from(data);
        while let Ok(Some(f)) = decode::<M>(&mut buf, max) {
            let mut again = BytesMut::new();
            // A decoded frame always encodes again.
            if encode(&f, &mut again).is_err() {
                panic!("a decoded frame failed to encode");
            }
        }
    }
    for max in [HANDSHAKE_MAX_FRAME, 1 << 20] {
        run::<ToWorker>(data, max);
        run::<FromWorker>(data, max);
    }
}
