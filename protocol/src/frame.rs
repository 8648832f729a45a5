//! Framing, synchronous and socket-free.
//!
//! ```text
//! u32 LE  body_len   = 4 + head_len + size · values
//! u32 LE  head_len   (at most MAX_HEAD)
//! head    bincode (standard config) of the message
//! payload values × (f32 or f64) LE, as many and of the type the message implies
//! ```
//! `body_len` is checked against the connection's limit before anything is
//! allocated; the payload length is checked against the message.

use crate::error::{Error, Result};
use crate::message::{Frame, Payload};
use crate::values::{DType, Values};
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
    /// Type and number of the values that follow.
    pub dtype: DType,
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
    let (dtype, expected) = msg.payload()?;
    let size = dtype.size();
    if !payload_bytes.is_multiple_of(size) || payload_bytes / size != expected {
        return Err(Error::PayloadMismatch {
            got: payload_bytes / size,
            expected,
        });
    }
    Ok(Some(Head {
        msg,
        head_bytes: PREFIX + head_len,
        dtype,
        values: expected as usize,
    }))
}

/// Encode the prefix and header of a frame carrying `payload_bytes` bytes of values.
pub fn encode_head<M: Serialize>(msg: &M, payload_bytes: u64, out: &mut Vec<u8>) -> Result<()> {
    let head = bincode::serde::encode_to_vec(msg, config()).map_err(|e| Error::Malformed(format!("encoding: {e}")))?;
    let body_len = (4 + head.len() as u64).saturating_add(payload_bytes);
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

/// Encode a whole frame into `out` (tests, fuzzing, small messages).
pub fn encode<M: Serialize + Payload>(frame: &Frame<M>, out: &mut BytesMut) -> Result<()> {
    let (dtype, expected) = frame.msg.payload()?;
    let empty = expected == 0 && frame.payload.is_empty();
    if !empty && (expected != frame.payload.len() as u64 || dtype != frame.payload.dtype()) {
        return Err(Error::PayloadMismatch {
            got: frame.payload.len() as u64,
            expected,
        });
    }
    let bytes = frame.payload.le_bytes();
    let mut head = Vec::new();
    encode_head(&frame.msg, bytes.len() as u64, &mut head)?;
    out.put_slice(&head);
    out.put_slice(&bytes);
    Ok(())
}

/// Decode one whole frame from the front of `buf`, consuming it. `Ok(None)`:
/// not enough bytes yet (nothing consumed).
pub fn decode<M: DeserializeOwned + Payload>(buf: &mut BytesMut, max_frame: u64) -> Result<Option<Frame<M>>> {
    let Some(head) = parse_head::<M>(buf, max_frame)? else {
        return Ok(None);
    };
    let bytes = head.dtype.size() as usize * head.values;
    if buf.len() < head.head_bytes + bytes {
        return Ok(None);
    }
    buf.advance(head.head_bytes);
    let mut payload = Values::zeros(head.dtype, head.values);
    payload.as_bytes_mut().copy_from_slice(&buf[..bytes]);
    payload.le_to_host();
    buf.advance(bytes);
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
