//! A chunk on the wire in pieces: the bytes of its inputs cut into `Part`
//! frames, so that a short message for the same worker (a grant for
//! another chunk's results) waits for one piece rather than the whole
//! chunk on the connection.

use dls_protocol::{ChunkId, Form, JobId, ToWorker};
use std::borrow::Cow;
use std::ops::Range;
use std::time::Duration;

/// Bytes a piece of a chunk carries at most: a grant for another chunk
/// waits for one piece on the connection, not for a whole chunk (the
/// planner counts a worker's return as free to start while its next chunk
/// goes out).
pub const PIECE_BYTES: usize = 256 << 10;

/// The bytes `range` of the concatenation of `parts`.
pub fn bytes_in<'a>(parts: &'a [Cow<'a, [u8]>], range: Range<usize>) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    for p in parts {
        let (lo, hi) = (range.start.max(at), range.end.min(at + p.len()));
        if lo < hi {
            out.push(&p[lo - at..hi - at]);
        }
        at += p.len();
    }
    out
}

/// How a chunk of `count` products of `form` (`bytes` of inputs) goes on
/// the wire: one `Assign`, or `Part`s of at most `piece` bytes (whole
/// values; [`PIECE_BYTES`] for a link that cuts chunks), each with its
/// share of the reading time.
pub fn pieces(
    job: JobId,
    chunk: ChunkId,
    form: Form,
    count: u32,
    bytes: usize,
    piece: usize,
    reading: Duration,
) -> Vec<(ToWorker, Range<usize>, Duration)> {
    if bytes <= piece {
        return vec![(
            ToWorker::Assign {
                job,
                chunk,
                form,
                count,
            },
            0..bytes,
            reading,
        )];
    }
    let size = form.dtype.size() as usize;
    let step = (piece / size * size).max(size);
    (0..bytes)
        .step_by(step)
        .map(|lo| {
            let hi = (lo + step).min(bytes);
            let len = ((hi - lo) / size) as u64;
            let msg = ToWorker::Part {
                job,
                chunk,
                form,
                count,
                len,
            };
            (msg, lo..hi, reading.mul_f64((hi - lo) as f64 / bytes as f64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dls_protocol::DType;

    #[test]
    fn bytes_in_is_a_range_of_the_concatenation() {
        let parts: Vec<Cow<[u8]>> = vec![
            Cow::Owned((0..5).collect()),
            Cow::Owned(vec![]),
            Cow::Owned((5..12).collect()),
        ];
        let all: Vec<u8> = (0..12).collect();
        for lo in 0..=12 {
            for hi in lo..=12 {
                let got: Vec<u8> = bytes_in(&parts, lo..hi).concat();
                assert_eq!(got, all[lo..hi], "{lo}..{hi}");
            }
        }
    }

    #[test]
    fn a_large_chunk_goes_in_whole_values_that_cover_it_once() {
        let (job, chunk) = (JobId(1), ChunkId(2));
        let reading = Duration::from_millis(700);
        // Small: one Assign of everything.
        let form = Form::square(8);
        let bytes = form.in_bytes(3) as usize;
        let one = pieces(job, chunk, form, 3, bytes, PIECE_BYTES, reading);
        assert_eq!(one.len(), 1);
        assert!(matches!(one[0].0, ToWorker::Assign { count: 3, .. }) && one[0].1 == (0..bytes) && one[0].2 == reading);
        for dtype in [DType::F32, DType::F64] {
            let form = Form {
                dtype,
                ..Form::square(300)
            };
            let bytes = form.in_bytes(5) as usize;
            let ps = pieces(job, chunk, form, 5, bytes, PIECE_BYTES, reading);
            // A link that does not cut chunks sends it whole.
            assert_eq!(pieces(job, chunk, form, 5, bytes, usize::MAX, reading).len(), 1);
            assert!(ps.len() > 1);
            let mut at = 0;
            let mut values = 0;
            let mut secs = 0.0;
            for (msg, range, r) in &ps {
                assert_eq!(range.start, at, "contiguous");
                assert!(range.len() <= PIECE_BYTES && range.len() % dtype.size() as usize == 0);
                match *msg {
                    ToWorker::Part { count: 5, len, .. } => {
                        assert_eq!(len as usize * dtype.size() as usize, range.len());
                        values += len;
                    }
                    ref other => panic!("{other:?}"),
                }
                secs += r.as_secs_f64();
                at = range.end;
            }
            assert_eq!(at, bytes);
            assert_eq!(values, form.in_len(5));
            assert!((secs - 0.7).abs() < 1e-6);
        }
    }
}
