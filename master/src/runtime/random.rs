//! Random inputs made as they are read. A batch given by its size alone
//! (`dls run --batch M --size n`) is random; its values are a function of
//! the seed and of their place in the array, so any range can be made on
//! its own, when a chunk is sent, and made again, the same, when a
//! product is checked. The master never holds the batch's inputs: none
//! are made before the first chunk goes out (making 300 products of
//! 256×256 up front took 0.44 s before the run could start, most of it
//! the first touch of 300 MB of fresh memory), and a batch larger than
//! the master's memory runs as well as a small one.
//!
//! The generator is SplitMix64 (Steele, Lea and Flood, "Fast splittable
//! pseudorandom number generators", OOPSLA 2014): value `i` of a stream is
//! the mix of `start + (i + 1)·γ`, which needs no earlier value. Not for
//! anything secret.

use crate::runtime::data::External;
use dls_protocol::{DType, Values};
use std::io;
use std::ops::Range;

/// The generator's name, as journals record it (`output/journal.rs`): a
/// batch resumed must be drawn as it was begun.
pub const GENERATOR: &str = "splitmix64";

/// SplitMix64's increment: the golden ratio's fractional part, in 64 bits.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function (variant 13 of Stafford's mixers).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The value in [-1, 1) that 64 random bits give: their top 52 as the
/// fraction of a float in [2, 4), less 3 (exact; no conversion from an
/// integer, which made generating 40% slower).
fn unit(x: u64) -> f64 {
    f64::from_bits(0x4000_0000_0000_0000 | (x >> 12)) - 3.0
}

/// One array of random values in [-1, 1): `len` of them, of `dtype`
/// (float32 ones rounded from the float64 draws), from `seed`.
#[derive(Debug, Clone)]
pub struct RandomValues {
    dtype: DType,
    len: usize,
    /// The stream's start: the seed mixed, so that near seeds give
    /// unrelated streams.
    start: u64,
}

impl RandomValues {
    pub fn new(dtype: DType, len: usize, seed: u64) -> RandomValues {
        RandomValues {
            dtype,
            len,
            start: mix(seed),
        }
    }

    /// Value `i` of the array, in float64 (before any rounding to float32):
    /// what a read steps to, written out (the tests' oracle).
    #[cfg(test)]
    pub fn at(&self, i: usize) -> f64 {
        unit(mix(self
            .start
            .wrapping_add((i as u64).wrapping_add(1).wrapping_mul(GAMMA))))
    }

    /// Values `range` in float64: the stream stepped from the range's
    /// start, each value as [`RandomValues::at`] gives it.
    fn draws(&self, range: Range<usize>) -> impl Iterator<Item = f64> {
        let mut state = self.start.wrapping_add((range.start as u64).wrapping_mul(GAMMA));
        range.map(move |_| {
            state = state.wrapping_add(GAMMA);
            unit(mix(state))
        })
    }
}

impl External for RandomValues {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, range: Range<usize>) -> io::Result<Values> {
        if range.start > range.end || range.end > self.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("values {range:?} of {}", self.len),
            ));
        }
        let no_memory = |_| io::Error::new(io::ErrorKind::OutOfMemory, format!("{} random values", range.len()));
        Ok(match self.dtype {
            DType::F64 => {
                let mut v = Vec::new();
                v.try_reserve_exact(range.len()).map_err(no_memory)?;
                v.extend(self.draws(range));
                Values::F64(v)
            }
            DType::F32 => {
                let mut v = Vec::new();
                v.try_reserve_exact(range.len()).map_err(no_memory)?;
                v.extend(self.draws(range).map(|x| x as f32));
                Values::F32(v)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64 written the usual way, a state stepped by γ and mixed:
    /// the oracle for random access.
    fn sequential(seed: u64, count: usize) -> Vec<f64> {
        let mut state = mix(seed);
        (0..count)
            .map(|_| {
                state = state.wrapping_add(GAMMA);
                unit(mix(state))
            })
            .collect()
    }

    fn f64s(v: Values) -> Vec<f64> {
        match v {
            Values::F64(v) => v,
            Values::F32(v) => v.into_iter().map(f64::from).collect(),
        }
    }

    #[test]
    fn any_range_is_the_stream_from_its_start() {
        let whole = sequential(7, 1000);
        let r = RandomValues::new(DType::F64, 1000, 7);
        for range in [0..0, 0..1000, 3..4, 17..901, 999..1000] {
            let got = f64s(r.read(range.clone()).expect("in range"));
            assert_eq!(got, whole[range.clone()].to_vec());
            assert!(range.zip(&got).all(|(i, x)| r.at(i) == *x));
        }
        // Read twice, the same values (a product is made again when checked).
        assert_eq!(r.read(5..50).expect("read"), r.read(5..50).expect("read"));
    }

    #[test]
    fn mix_is_splitmix64() {
        // The first outputs of SplitMix64 from state 0, as its reference
        // implementation prints them (state += γ, then mixed).
        assert_eq!(mix(GAMMA), 0xe220_a839_7b1d_cdaf);
        assert_eq!(mix(GAMMA.wrapping_mul(2)), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn values_are_uniform_in_the_unit_interval() {
        let n = 200_000;
        let v = f64s(RandomValues::new(DType::F64, n, 42).read(0..n).expect("read"));
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        // Uniform on [-1, 1): mean 0 (sd of the mean 0.0013), variance 1/3.
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0 / 3.0).abs() < 0.01, "variance {var}");
        // Each tenth of the interval holds about a tenth of the values.
        let mut bins = [0usize; 10];
        v.iter().for_each(|x| bins[((x + 1.0) * 5.0) as usize] += 1);
        assert!(
            bins.iter()
                .all(|&b| (b as f64 - n as f64 / 10.0).abs() < 0.03 * n as f64),
            "{bins:?}"
        );
    }

    #[test]
    fn seeds_give_unrelated_streams_and_float32_rounds_the_same_draws() {
        let (a, b) = (
            RandomValues::new(DType::F64, 64, 1),
            RandomValues::new(DType::F64, 64, 2),
        );
        let (a, b) = (f64s(a.read(0..64).expect("a")), f64s(b.read(0..64).expect("b")));
        assert!(a.iter().zip(&b).all(|(x, y)| x != y));
        let single = RandomValues::new(DType::F32, 64, 1).read(0..64).expect("f32");
        match single {
            Values::F32(s) => assert!(s.iter().zip(&a).all(|(x, y)| *x == *y as f32)),
            Values::F64(_) => panic!("float32 values asked"),
        }
    }

    #[test]
    fn reads_past_the_end_are_refused() {
        let r = RandomValues::new(DType::F64, 10, 0);
        assert!(r.read(5..11).is_err());
        let backwards = std::ops::Range { start: 6, end: 5 };
        assert!(r.read(backwards).is_err());
    }
}
