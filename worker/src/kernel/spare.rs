//! Buffers a chunk no longer needs (its inputs once computed, its results
//! once written), kept for the next chunks' inputs and results. The daemon gives every freed buffer of 128 KiB
//! or more back to the system (`dls_common::return_freed_buffers`), so a
//! fresh one is mapped page by page as the kernel first writes it: on an
//! AMD EPYC (Zen 4) the faults cost a batch of 64×64 products 60% of its
//! time and one of 512×512 20% (`dls-worker bench`, docs/worker.md).

use dls_protocol::{DType, Values};
use std::sync::Mutex;

/// Buffers kept at most: a chunk's inputs and results, and the next one's.
const KEPT: usize = 4;

/// Spare buffers, at most [`KEPT`] of them and `cap` bytes in all.
pub(super) struct Spare {
    kept: Mutex<Vec<Values>>,
    cap: u64,
}

fn bytes(v: &Values) -> u64 {
    match v {
        Values::F32(v) => 4 * v.capacity() as u64,
        Values::F64(v) => 8 * v.capacity() as u64,
    }
}

impl Spare {
    pub(super) fn new(cap: u64) -> Spare {
        Spare {
            kept: Mutex::new(Vec::new()),
            cap,
        }
    }

    /// Keep `v` for a later [`Spare::take`] if it fits the cap (the
    /// smallest kept buffers make room for it).
    pub(super) fn keep(&self, mut v: Values) {
        let size = bytes(&v);
        if size == 0 || size > self.cap {
            return;
        }
        // Its whole capacity holds values from here on, so that `take`
        // only ever shortens it: a later chunk's timed work writes no
        // zeros (a results buffer is often shorter than what it held).
        match &mut v {
            Values::F32(v) => v.resize(v.capacity(), 0.0),
            Values::F64(v) => v.resize(v.capacity(), 0.0),
        }
        let Ok(mut kept) = self.kept.lock() else { return };
        kept.push(v);
        kept.sort_by_key(|v| std::cmp::Reverse(bytes(v)));
        while kept.len() > KEPT || kept.iter().map(bytes).sum::<u64>() > self.cap {
            kept.pop();
        }
    }

    /// A kept buffer of `len` values of `dtype`, the smallest that holds
    /// them, shortened to them; its values are whatever it held (the
    /// kernel, or the pieces of a chunk, overwrite them).
    pub(super) fn take(&self, dtype: DType, len: usize) -> Option<Values> {
        let mut kept = self.kept.lock().ok()?;
        let fits = |v: &Values| v.dtype() == dtype && bytes(v) >= len as u64 * dtype.size();
        let at = (0..kept.len()).rev().find(|&i| fits(&kept[i]))?;
        let mut v = kept.remove(at);
        drop(kept);
        match &mut v {
            Values::F32(v) => v.truncate(len),
            Values::F64(v) => v.truncate(len),
        }
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_serves_a_shorter_one_of_its_type_only() {
        let spare = Spare::new(1 << 20);
        spare.keep(Values::F64(vec![1.0; 100]));
        assert!(
            spare.take(DType::F32, 10).is_none(),
            "a float64 buffer is not a float32 one"
        );
        assert!(spare.take(DType::F64, 101).is_none(), "too short");
        let v = spare.take(DType::F64, 60).expect("kept");
        assert_eq!((v.len(), v.dtype()), (60, DType::F64));
        assert!(spare.take(DType::F64, 1).is_none(), "taken once");
    }

    #[test]
    fn the_cap_and_the_count_bound_what_is_kept_the_largest_first() {
        let spare = Spare::new(8 * 250);
        spare.keep(Values::F64(vec![0.0; 300])); // over the cap: dropped
        for len in [50, 100, 150] {
            spare.keep(Values::F64(vec![0.0; len]));
        }
        // 150 + 100 = 250 values: the 50 went.
        assert_eq!(spare.take(DType::F64, 120).map(|v| v.len()), Some(120));
        assert_eq!(spare.take(DType::F64, 100).map(|v| v.len()), Some(100));
        assert!(spare.take(DType::F64, 10).is_none());
        let spare = Spare::new(1 << 20);
        for len in 1..=6 {
            spare.keep(Values::F32(vec![0.0; 10 * len]));
        }
        let mut left = Vec::new();
        while let Some(v) = spare.take(DType::F32, 1) {
            let Values::F32(v) = v else { panic!("type") };
            left.push(v.capacity());
        }
        assert_eq!(left, [30, 40, 50, 60], "the {KEPT} largest, the smallest taken first");
    }

    #[test]
    fn the_smallest_buffer_that_fits_is_taken() {
        let spare = Spare::new(1 << 20);
        spare.keep(Values::F32(vec![0.0; 1000]));
        spare.keep(Values::F32(vec![0.0; 200]));
        let v = spare.take(DType::F32, 150).expect("kept");
        let Values::F32(v) = v else { panic!("type") };
        assert!(v.capacity() < 1000, "the 200 served, capacity {}", v.capacity());
        assert!(spare.take(DType::F32, 900).is_some(), "the 1000 is still there");
    }
}
