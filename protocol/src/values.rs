//! What a product looks like on the wire: its shape ([`Shape`]), its
//! element type ([`DType`]), whether one B serves every product
//! ([`Form`]), and typed payloads ([`Values`]).

use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The element type of a batch's matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    F32,
    F64,
}

impl DType {
    /// Bytes per value.
    pub const fn size(self) -> u64 {
        match self {
            DType::F32 => 4,
            DType::F64 => 8,
        }
    }

    /// The name users write and read: `float32`, `float64`.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// The type from its name (`float32`, `f32`, `float64`, `f64`).
    pub fn parse(s: &str) -> Option<DType> {
        match s.to_ascii_lowercase().as_str() {
            "float32" | "f32" | "single" => Some(DType::F32),
            "float64" | "f64" | "double" => Some(DType::F64),
            _ => None,
        }
    }

    /// Machine epsilon of the type.
    pub const fn epsilon(self) -> f64 {
        match self {
            DType::F32 => f32::EPSILON as f64,
            DType::F64 => f64::EPSILON,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The shape of one product C = A·B: A is n×k, B is k×m, C is n×m.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape {
    pub n: u32,
    pub k: u32,
    pub m: u32,
}

impl Shape {
    pub const fn square(n: u32) -> Shape {
        Shape { n, k: n, m: n }
    }

    pub fn is_square(&self) -> bool {
        self.n == self.k && self.k == self.m
    }

    /// Values of A, B and C (saturating: never overflows).
    pub fn a_len(&self) -> u64 {
        (self.n as u64).saturating_mul(self.k as u64)
    }
    pub fn b_len(&self) -> u64 {
        (self.k as u64).saturating_mul(self.m as u64)
    }
    pub fn c_len(&self) -> u64 {
        (self.n as u64).saturating_mul(self.m as u64)
    }

    /// Floating-point operations of one product (2·n·k·m).
    pub fn flops(&self) -> f64 {
        2.0 * self.n as f64 * self.k as f64 * self.m as f64
    }
}

impl std::fmt::Display for Shape {
    /// `256×256` for square products, `n×k·k×m` otherwise.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_square() {
            write!(f, "{}×{}", self.n, self.n)
        } else {
            write!(f, "{}×{}·{}×{}", self.n, self.k, self.k, self.m)
        }
    }
}

/// Everything the bytes of a product depend on: its shape, its type, and
/// whether a single B is shared by every product of the job (then chunks
/// carry only A, and B travels once per worker in `ShareB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Form {
    pub shape: Shape,
    pub dtype: DType,
    pub shared_b: bool,
}

impl Form {
    /// Square float64 products, one B each: what `dls` ran before shapes.
    pub const fn square(n: u32) -> Form {
        Form {
            shape: Shape::square(n),
            dtype: DType::F64,
            shared_b: false,
        }
    }

    fn bytes(&self, values: u64) -> u64 {
        values.saturating_mul(self.dtype.size())
    }

    /// Bytes of one A, one B, one C.
    pub fn a_bytes(&self) -> u64 {
        self.bytes(self.shape.a_len())
    }
    pub fn b_bytes(&self) -> u64 {
        self.bytes(self.shape.b_len())
    }
    pub fn c_bytes(&self) -> u64 {
        self.bytes(self.shape.c_len())
    }

    /// Values a chunk of `count` products carries to a worker: the A's,
    /// and the B's unless B is shared.
    pub fn in_len(&self, count: u32) -> u64 {
        let per = match self.shared_b {
            true => self.shape.a_len(),
            false => self.shape.a_len().saturating_add(self.shape.b_len()),
        };
        per.saturating_mul(count as u64)
    }

    /// Bytes a chunk of `count` products carries to a worker.
    pub fn in_bytes(&self, count: u32) -> u64 {
        self.bytes(self.in_len(count))
    }

    /// Bytes of the results of `count` products.
    pub fn out_bytes(&self, count: u32) -> u64 {
        self.c_bytes().saturating_mul(count as u64)
    }

    /// Bytes a worker holds for a chunk of `count` products (its inputs
    /// and its results; a shared B is held once, apart).
    pub fn held_bytes(&self, count: u32) -> u64 {
        self.in_bytes(count).saturating_add(self.out_bytes(count))
    }
}

impl std::fmt::Display for Form {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.shape, self.dtype)?;
        if self.shared_b {
            f.write_str(", one shared B")?;
        }
        Ok(())
    }
}

/// A typed array of values: a payload, a batch's A or B, its C.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Default for Values {
    fn default() -> Self {
        Values::F64(Vec::new())
    }
}

impl Values {
    /// `len` zeros of type `dtype`.
    pub fn zeros(dtype: DType, len: usize) -> Values {
        match dtype {
            DType::F32 => Values::F32(vec![0.0; len]),
            DType::F64 => Values::F64(vec![0.0; len]),
        }
    }

    /// `len` zeros, or `None` when the memory cannot be had.
    pub fn try_zeros(dtype: DType, len: usize) -> Option<Values> {
        Some(match dtype {
            DType::F32 => Values::F32(zeroed(len)?),
            DType::F64 => Values::F64(zeroed(len)?),
        })
    }

    pub fn dtype(&self) -> DType {
        match self {
            Values::F32(_) => DType::F32,
            Values::F64(_) => DType::F64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values the array holds without growing.
    pub fn capacity(&self) -> usize {
        match self {
            Values::F32(v) => v.capacity(),
            Values::F64(v) => v.capacity(),
        }
    }

    /// `len` values: cut to them, or grown with zeros.
    pub fn resize(&mut self, len: usize) {
        match self {
            Values::F32(v) => v.resize(len, 0.0),
            Values::F64(v) => v.resize(len, 0.0),
        }
    }

    /// The values in host order, as bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Values::F32(v) => bytemuck::cast_slice(v),
            Values::F64(v) => bytemuck::cast_slice(v),
        }
    }

    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Values::F32(v) => bytemuck::cast_slice_mut(v),
            Values::F64(v) => bytemuck::cast_slice_mut(v),
        }
    }

    /// The values as little-endian bytes: a view where the host is little-endian.
    pub fn le_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Values::F32(v) => le_bytes(v),
            Values::F64(v) => le_bytes(v),
        }
    }

    /// Values `range` as little-endian bytes: a view where the host is little-endian.
    pub fn le_range(&self, range: std::ops::Range<usize>) -> Cow<'_, [u8]> {
        match self {
            Values::F32(v) => le_bytes(&v[range]),
            Values::F64(v) => le_bytes(&v[range]),
        }
    }

    /// Values `range` as a new array of the same type.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Values {
        match self {
            Values::F32(v) => Values::F32(v[range].to_vec()),
            Values::F64(v) => Values::F64(v[range].to_vec()),
        }
    }

    /// Copy `src` (of the same type) into `self` from `at` on. Fails,
    /// naming both, when the types differ or `src` does not fit.
    pub fn copy_in(&mut self, at: usize, src: &Values) -> Result<(), String> {
        self.copy_range_in(at, src, 0..src.len())
    }

    /// Copy values `range` of `src` (of the same type) into `self` from
    /// `at` on, without an intermediate copy.
    pub fn copy_range_in(&mut self, at: usize, src: &Values, range: std::ops::Range<usize>) -> Result<(), String> {
        let len = range.len();
        let fits = range.end <= src.len() && at.checked_add(len).is_some_and(|end| end <= self.len());
        if !fits {
            return Err(format!(
                "values {range:?} of {} at {at} do not fit in {}",
                src.len(),
                self.len()
            ));
        }
        match (self, src) {
            (Values::F32(d), Values::F32(s)) => d[at..at + len].copy_from_slice(&s[range]),
            (Values::F64(d), Values::F64(s)) => d[at..at + len].copy_from_slice(&s[range]),
            (d, s) => return Err(format!("{} values into {} ones", s.dtype(), d.dtype())),
        }
        Ok(())
    }

    /// Value `i` widened to f64.
    pub fn get(&self, i: usize) -> f64 {
        match self {
            Values::F32(v) => v[i] as f64,
            Values::F64(v) => v[i],
        }
    }

    /// Values `range` widened to f64 (exact for both types).
    pub fn to_f64(&self, range: std::ops::Range<usize>) -> Cow<'_, [f64]> {
        match self {
            Values::F32(v) => Cow::Owned(v[range].iter().map(|&x| x as f64).collect()),
            Values::F64(v) => Cow::Borrowed(&v[range]),
        }
    }

    /// Turn little-endian values, already in place, into host order.
    pub fn le_to_host(&mut self) {
        if cfg!(target_endian = "big") {
            match self {
                Values::F32(v) => v.iter_mut().for_each(|x| *x = f32::from_le_bytes(x.to_ne_bytes())),
                Values::F64(v) => v.iter_mut().for_each(|x| *x = f64::from_le_bytes(x.to_ne_bytes())),
            }
        }
    }
}

impl From<Vec<f64>> for Values {
    fn from(v: Vec<f64>) -> Self {
        Values::F64(v)
    }
}

impl From<Vec<f32>> for Values {
    fn from(v: Vec<f32>) -> Self {
        Values::F32(v)
    }
}

/// Raw little-endian bytes of values: a view where the host is little-endian.
pub fn le_bytes<T: bytemuck::Pod>(values: &[T]) -> Cow<'_, [u8]> {
    if cfg!(target_endian = "little") {
        Cow::Borrowed(bytemuck::cast_slice(values))
    } else {
        let size = std::mem::size_of::<T>();
        Cow::Owned(
            bytemuck::cast_slice::<T, u8>(values)
                .chunks_exact(size)
                .flat_map(|c| c.iter().rev().copied())
                .collect(),
        )
    }
}

/// Floats of value zero, `len` of them, from the allocator's zeroed memory,
/// or `None` when it has none. Zeroed memory costs nothing to write: a
/// large block comes from the system already zero and its pages are
/// mapped as they are first written. Writing the zeros (as `resize` does)
/// touched every page at once: 20-30 ms for a worker's piece of 26 MB, on
/// the critical path of its first panel.
#[allow(unsafe_code)]
fn zeroed<T: Zeroable>(len: usize) -> Option<Vec<T>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(len).ok()?;
    // SAFETY: the layout has a non-zero size (len > 0, T is a float);
    // the pointer, when not null, is a block of `len` T of that layout,
    // all bits zero, which is the value 0.0 of f32 and f64 (`Zeroable`);
    // the Vec takes it with the allocator and layout it came from.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut T;
        if ptr.is_null() {
            return None;
        }
        Some(Vec::from_raw_parts(ptr, len, len))
    }
}

/// Types whose all-zero bit pattern is a valid value (zero).
trait Zeroable {}
impl Zeroable for f32 {}
impl Zeroable for f64 {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_shape_type_and_sharing() {
        let f = Form {
            shape: Shape { n: 3, k: 5, m: 2 },
            dtype: DType::F32,
            shared_b: false,
        };
        assert_eq!((f.a_bytes(), f.b_bytes(), f.c_bytes()), (60, 40, 24));
        assert_eq!(f.in_bytes(4), 4 * 100);
        assert_eq!(f.held_bytes(4), 4 * 124);
        let shared = Form { shared_b: true, ..f };
        assert_eq!(shared.in_len(4), 4 * 15);
        assert_eq!(Form::square(4).in_bytes(3), 2 * 3 * 16 * 8);
        let huge = Form::square(u32::MAX);
        assert_eq!(huge.in_bytes(u32::MAX), u64::MAX);
    }

    #[test]
    fn resize_cuts_or_grows_with_zeros_and_keeps_the_capacity() {
        let mut v = Values::F64(vec![1.0, 2.0, 3.0]);
        let cap = v.capacity();
        v.resize(1);
        assert_eq!(v, Values::F64(vec![1.0]));
        assert_eq!(v.capacity(), cap, "cutting keeps the memory");
        v.resize(3);
        assert_eq!(v, Values::F64(vec![1.0, 0.0, 0.0]));
        let mut f = Values::F32(vec![]);
        f.resize(2);
        assert_eq!(f, Values::F32(vec![0.0, 0.0]));
    }

    #[test]
    fn try_zeros_gives_zeros_or_none_when_memory_cannot_be_had() {
        for (dtype, len) in [
            (DType::F64, 0),
            (DType::F32, 3),
            (DType::F64, 1 << 20),
            (DType::F32, (1 << 22) + 7),
        ] {
            let v = Values::try_zeros(dtype, len).expect("small enough");
            assert_eq!((v.dtype(), v.len()), (dtype, len));
            assert!(v.to_f64(0..len).iter().all(|&x| x == 0.0));
            // Written and read back like any vector.
            if let Values::F64(mut w) = v {
                w.push(1.5);
                assert_eq!(w.last(), Some(&1.5));
            }
        }
        // More bytes than an address space holds; more than any machine has.
        assert!(Values::try_zeros(DType::F64, usize::MAX / 4).is_none());
        assert!(Values::try_zeros(DType::F64, 1 << 58).is_none());
    }

    #[test]
    fn values_copy_in_checks_type_and_room() {
        let mut v = Values::zeros(DType::F32, 4);
        v.copy_in(1, &Values::F32(vec![1.0, 2.0])).expect("fits");
        assert_eq!(v, Values::F32(vec![0.0, 1.0, 2.0, 0.0]));
        assert!(v.copy_in(3, &Values::F32(vec![1.0, 2.0])).is_err());
        assert!(v.copy_in(0, &Values::F64(vec![1.0])).is_err());
        assert_eq!(v.to_f64(1..3).into_owned(), vec![1.0, 2.0]);
        assert_eq!(DType::parse("Float32"), Some(DType::F32));
        assert_eq!(DType::parse("int8"), None);
        assert_eq!(format!("{}", Shape { n: 2, k: 3, m: 4 }), "2×3·3×4");
        assert_eq!(format!("{}", Form::square(8)), "8×8 float64");
    }
}
