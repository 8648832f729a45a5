//! Where a batch's matrices come from and where its results go: arrays in
//! memory, or files read and written in place, a chunk at a time, so that
//! the master holds the chunks in flight and not the batch.

use dls_protocol::{DType, Values};
use std::borrow::Cow;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

/// Values of one type stored in a file from byte `prefix` on, row-major,
/// back to back (a C-ordered `.npy` array), read where they lie.
#[derive(Debug)]
pub struct InputFile {
    pub file: std::fs::File,
    /// For messages.
    pub path: PathBuf,
    pub prefix: u64,
    pub dtype: DType,
    pub big_endian: bool,
    /// Values in the file.
    pub len: usize,
}

impl InputFile {
    /// Values `range`, in host byte order.
    pub fn read(&self, range: Range<usize>) -> io::Result<Values> {
        self.check(&range, self.dtype)?;
        let mut v = Values::try_zeros(self.dtype, range.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, format!("{} values", range.len())))?;
        self.read_into(range.start, &mut v, 0..range.len())?;
        Ok(v)
    }

    /// Values `range` written into `out` from value `at` on (of the
    /// file's type), in host byte order: read straight into `out`, with no
    /// buffer of their own. A panel of one large product is one read per
    /// row of A; through a buffer each, reading panels took 63% of the
    /// master's processor (a 4096² product from `.npy` files, four
    /// loopback workers).
    pub fn read_at(&self, range: Range<usize>, out: &mut Values, at: usize) -> io::Result<()> {
        self.check(&range, out.dtype())?;
        if at.checked_add(range.len()).is_none_or(|end| end > out.len()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: {} values at {at} of {}",
                    self.path.display(),
                    range.len(),
                    out.len()
                ),
            ));
        }
        self.read_into(range.start, out, at..at + range.len())
    }

    /// `range` is within the file, and values of `dtype` are the file's.
    fn check(&self, range: &Range<usize>, dtype: DType) -> io::Result<()> {
        if range.end > self.len || range.start > range.end || dtype != self.dtype {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: values {range:?} of {} as {dtype}", self.path.display(), self.len),
            ));
        }
        Ok(())
    }

    /// `out[to]` read from the file's values at `at` on, in host byte
    /// order (the caller checked both ranges).
    fn read_into(&self, at: usize, out: &mut Values, to: Range<usize>) -> io::Result<()> {
        let size = self.dtype.size() as usize;
        self.file
            .read_exact_at(
                &mut out.as_bytes_mut()[to.start * size..to.end * size],
                self.prefix + (at * size) as u64,
            )
            .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", self.path.display())))?;
        if self.big_endian != cfg!(target_endian = "big") {
            match out {
                Values::F32(v) => swap(&mut v[to]),
                Values::F64(v) => swap(&mut v[to]),
            }
        }
        Ok(())
    }
}

/// Each value's bytes reversed.
fn swap<T: Swap>(v: &mut [T]) {
    v.iter_mut().for_each(|x| *x = x.swapped());
}

trait Swap: Copy {
    fn swapped(self) -> Self;
}
impl Swap for f32 {
    fn swapped(self) -> f32 {
        f32::from_bits(self.to_bits().swap_bytes())
    }
}
impl Swap for f64 {
    fn swapped(self) -> f64 {
        f64::from_bits(self.to_bits().swap_bytes())
    }
}

/// An array that lives elsewhere (a NumPy array of the Python package, say)
/// and is copied from a chunk at a time as the chunks are sent, never whole.
pub trait External: Send + Sync + std::fmt::Debug {
    fn dtype(&self) -> DType;
    /// Values in the array.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A copy of values `range` (within `len`), in host byte order.
    fn read(&self, range: Range<usize>) -> io::Result<Values>;
}

/// Where one of a batch's arrays (A, or B) is.
#[derive(Debug, Clone)]
pub enum Source {
    Memory(Arc<Values>),
    File(Arc<InputFile>),
    External(Arc<dyn External>),
    /// Some products of another source, back to back.
    Subset(Arc<Subset>),
}

/// Sorted, disjoint ranges of a batch's products, numbered back to back:
/// the `i`-th product of the runs is a product of the batch.
#[derive(Debug, Clone)]
pub struct Runs {
    runs: Vec<Range<usize>>,
    /// Where each run starts in the numbering.
    starts: Vec<usize>,
}

impl Runs {
    pub fn new(runs: Vec<Range<usize>>) -> Runs {
        let mut starts = Vec::with_capacity(runs.len());
        let mut at = 0;
        for r in &runs {
            starts.push(at);
            at += r.len();
        }
        Runs { runs, starts }
    }

    pub fn ranges(&self) -> &[Range<usize>] {
        &self.runs
    }

    /// Products in the runs.
    pub fn count(&self) -> usize {
        self.runs.iter().map(|r| r.len()).sum()
    }

    /// The batch's product that is the runs' `local`-th, and how many of
    /// the runs' products from there on are consecutive in the batch.
    pub fn locate(&self, local: usize) -> (usize, usize) {
        let r = self.starts.partition_point(|&s| s <= local).saturating_sub(1);
        let global = self.runs[r].start + (local - self.starts[r]);
        (global, self.runs[r].end - global)
    }

    /// The batch's product that is the runs' `local`-th.
    pub fn global(&self, local: usize) -> usize {
        self.locate(local).0
    }
}

/// Products `runs` of `inner` (each `per` values), back to back: the
/// products a resumed run still has to compute.
#[derive(Debug)]
pub struct Subset {
    inner: Source,
    per: usize,
    runs: Runs,
}

impl Subset {
    pub fn new(inner: Source, per: usize, runs: Vec<Range<usize>>) -> Subset {
        Subset {
            inner,
            per,
            runs: Runs::new(runs),
        }
    }

    /// Products in the subset.
    pub fn count(&self) -> usize {
        self.runs.count()
    }

    /// The product of `inner` that is the subset's `local`-th.
    pub fn global(&self, local: usize) -> usize {
        self.runs.global(local)
    }

    /// Values `range` of the subset: read from `inner` in the pieces that
    /// lie back to back there, joined when there are several.
    fn read(&self, range: Range<usize>) -> io::Result<Slab> {
        if range.start > range.end || range.end > self.count() * self.per {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("values {range:?} of {}", self.count() * self.per),
            ));
        }
        let mut pieces = Vec::new();
        let mut at = range.start;
        while at < range.end {
            let local = at / self.per;
            let (global, consecutive) = self.runs.locate(local);
            let end = range.end.min((local + consecutive) * self.per);
            let from = global * self.per + at % self.per;
            pieces.push(from..from + (end - at));
            at = end;
        }
        if let [one] = pieces.as_slice() {
            return self.inner.read(one.clone());
        }
        let mut out = Values::try_zeros(self.inner.dtype(), range.len())
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, format!("{} values", range.len())))?;
        let mut filled = 0;
        for p in pieces {
            let slab = self.inner.read(p.clone())?;
            let bytes = slab.le_bytes();
            let size = self.inner.dtype().size() as usize;
            out.as_bytes_mut()[filled * size..(filled + p.len()) * size].copy_from_slice(&bytes);
            filled += p.len();
        }
        out.le_to_host();
        Ok(Slab::Owned(out))
    }
}

impl Source {
    pub fn dtype(&self) -> DType {
        match self {
            Source::Memory(v) => v.dtype(),
            Source::File(f) => f.dtype,
            Source::External(x) => x.dtype(),
            Source::Subset(s) => s.inner.dtype(),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Source::Memory(v) => v.len(),
            Source::File(f) => f.len,
            Source::External(x) => x.len(),
            Source::Subset(s) => s.count() * s.per,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values `range`: a view of an array in memory, or read from the file.
    pub fn read(&self, range: Range<usize>) -> io::Result<Slab> {
        match self {
            Source::Memory(v) if range.end <= v.len() && range.start <= range.end => Ok(Slab::View(v.clone(), range)),
            Source::Memory(v) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("values {range:?} of {}", v.len()),
            )),
            Source::File(f) => f.read(range).map(Slab::Owned),
            Source::External(x) if range.end <= x.len() && range.start <= range.end => x.read(range).map(Slab::Owned),
            Source::External(x) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("values {range:?} of {}", x.len()),
            )),
            Source::Subset(s) => s.read(range),
        }
    }

    /// Values `range` written into `out` (of the source's type) from value
    /// `at` on: read from a file straight into `out`, copied otherwise.
    pub fn read_at(&self, range: Range<usize>, out: &mut Values, at: usize) -> io::Result<()> {
        let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        match self {
            Source::File(f) => f.read_at(range, out, at),
            Source::Memory(v) => out.copy_range_in(at, v, range).map_err(invalid),
            other => match other.read(range)? {
                Slab::Owned(v) => out.copy_range_in(at, &v, 0..v.len()).map_err(invalid),
                Slab::View(v, r) => out.copy_range_in(at, &v, r).map_err(invalid),
            },
        }
    }
}

/// Values of a chunk, read once: a view of an array in memory (nothing
/// copied), or values read from a file.
#[derive(Debug, Clone)]
pub enum Slab {
    View(Arc<Values>, Range<usize>),
    Owned(Values),
}

impl Slab {
    pub fn len(&self) -> usize {
        match self {
            Slab::View(_, r) => r.len(),
            Slab::Owned(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values as little-endian bytes, as the wire carries them.
    pub fn le_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Slab::View(v, r) => v.le_range(r.clone()),
            Slab::Owned(v) => v.le_bytes(),
        }
    }

    /// Values `range` of the slab, widened to f64.
    pub fn to_f64(&self, range: Range<usize>) -> Cow<'_, [f64]> {
        match self {
            Slab::View(v, r) => v.to_f64(r.start + range.start..r.start + range.end),
            Slab::Owned(v) => v.to_f64(range),
        }
    }
}

/// Merge sorted product indices into contiguous runs of products.
pub fn runs(products: &[usize]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for &i in products {
        match out.last_mut() {
            Some(r) if r.end == i => r.end += 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// Where the results go, one product at a time, in batch order.
pub trait Sink: Send {
    /// Store C of product `product`: values `range` of `c` (n×m of them,
    /// in the batch's type).
    fn store(&mut self, product: usize, c: &Values, range: Range<usize>) -> io::Result<()>;

    /// Store C of the products `first`, `first + 1`, ...: values `range` of
    /// `c`, `per` values each, back to back. By default one `store` each; a
    /// sink that can take them at once (one write) does.
    fn store_run(&mut self, first: usize, c: &Values, range: Range<usize>, per: usize) -> io::Result<()> {
        for (k, start) in range.clone().step_by(per.max(1)).enumerate() {
            self.store(first + k, c, start..(start + per).min(range.end))?;
        }
        Ok(())
    }
}

/// The results in memory: C of every product back to back.
pub struct MemorySink(pub Values);

impl Sink for MemorySink {
    fn store(&mut self, product: usize, c: &Values, range: Range<usize>) -> io::Result<()> {
        let len = range.len();
        self.0
            .copy_range_in(product * len, c, range)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    }
}

/// The products of a batch's tail, stored where the whole batch's go:
/// product `i` of the tail is product `by + i` of `inner`.
pub struct Offset<'a> {
    pub inner: &'a mut dyn Sink,
    pub by: usize,
}

impl Sink for Offset<'_> {
    fn store(&mut self, product: usize, c: &Values, range: Range<usize>) -> io::Result<()> {
        self.inner.store(self.by + product, c, range)
    }

    fn store_run(&mut self, first: usize, c: &Values, range: Range<usize>, per: usize) -> io::Result<()> {
        self.inner.store_run(self.by + first, c, range, per)
    }
}

/// Results not kept (those the master checks are kept apart, see the shell).
pub struct Discard;

impl Sink for Discard {
    fn store(&mut self, _: usize, _: &Values, _: Range<usize>) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every read of a subset, of any range (products whole or cut), is the
    /// same values as reading the products one by one from the source.
    #[test]
    fn a_subset_reads_the_products_it_names() {
        let per = 3;
        let inner = Source::Memory(Arc::new(Values::F64((0..60).map(|v| v as f64).collect())));
        let runs = vec![1..3, 5..6, 10..20];
        let sub = Subset::new(inner.clone(), per, runs.clone());
        let products: Vec<usize> = runs.iter().flat_map(|r| r.clone()).collect();
        assert_eq!(sub.count(), products.len());
        let want: Vec<f64> = products
            .iter()
            .flat_map(|&p| (p * per..(p + 1) * per).map(|v| v as f64))
            .collect();
        for (local, &p) in products.iter().enumerate() {
            assert_eq!(sub.global(local), p);
        }
        let src = Source::Subset(Arc::new(sub));
        assert_eq!(src.len(), want.len());
        for start in 0..want.len() {
            for end in start..=want.len() {
                let got = src.read(start..end).expect("reads");
                assert_eq!(
                    got.to_f64(0..end - start).into_owned(),
                    want[start..end],
                    "{start}..{end}"
                );
            }
        }
        assert!(src.read(0..want.len() + 1).is_err(), "past the end");
    }

    #[test]
    fn files_are_read_where_the_values_lie_in_either_byte_order() {
        let path = std::env::temp_dir().join(format!("dls-data-{}.bin", std::process::id()));
        let values: Vec<f32> = (0..10).map(|i| i as f32 + 0.25).collect();
        for big_endian in [false, true] {
            let mut bytes = vec![7u8; 3];
            for v in &values {
                bytes.extend(if big_endian { v.to_be_bytes() } else { v.to_le_bytes() });
            }
            std::fs::write(&path, &bytes).expect("writes");
            let f = InputFile {
                file: std::fs::File::open(&path).expect("opens"),
                path: path.clone(),
                prefix: 3,
                dtype: DType::F32,
                big_endian,
                len: 10,
            };
            let src = Source::File(Arc::new(f));
            let slab = src.read(4..7).expect("reads");
            assert_eq!(slab.to_f64(0..3).into_owned(), vec![4.25, 5.25, 6.25]);
            assert_eq!(&slab.le_bytes()[..4], &4.25f32.to_le_bytes());
            assert!(src.read(8..11).is_err(), "past the end");
            // Into what is there already, in host order; nothing written
            // when the range is past the end, does not fit or the type differs.
            let Source::File(f) = &src else { unreachable!() };
            let mut out = Values::F32(vec![-1.0; 4]);
            f.read_at(1..3, &mut out, 1).expect("reads");
            f.read_at(9..10, &mut out, 3).expect("reads");
            assert_eq!(out, Values::F32(vec![-1.0, 1.25, 2.25, 9.25]));
            assert!(f.read_at(9..11, &mut out, 0).is_err());
            assert!(f.read_at(0..2, &mut out, 3).is_err());
            assert!(f.read_at(0..1, &mut Values::F64(vec![0.0]), 0).is_err());
            assert_eq!(out, Values::F32(vec![-1.0, 1.25, 2.25, 9.25]));
            // Every kind of source into a place in `out`.
            let mut all = Values::F32(vec![0.0; 3]);
            src.read_at(4..6, &mut all, 1).expect("reads");
            assert_eq!(all, Values::F32(vec![0.0, 4.25, 5.25]));
        }
        let _ = std::fs::remove_file(path);
        let mem = Source::Memory(Arc::new(Values::F64((0..6).map(f64::from).collect())));
        let view = mem.read(2..5).expect("a view");
        assert!(matches!(view, Slab::View(..)));
        assert_eq!(view.to_f64(1..3).into_owned(), vec![3.0, 4.0]);
        assert!(mem.read(5..7).is_err());
        let mut into = Values::F64(vec![0.0; 3]);
        mem.read_at(4..6, &mut into, 1).expect("copies");
        assert_eq!(into, Values::F64(vec![0.0, 4.0, 5.0]));
        assert!(mem.read_at(4..7, &mut into, 0).is_err(), "past the source's end");
        assert!(mem.read_at(0..2, &mut into, 2).is_err(), "past the end of `out`");
        assert_eq!(runs(&[1, 2, 3, 7, 9, 10]), vec![1..4, 7..8, 9..11]);
    }

    #[test]
    fn a_memory_sink_puts_each_product_in_its_place() {
        let mut s = MemorySink(Values::zeros(DType::F64, 6));
        let c = Values::F64(vec![1.0, 2.0, 3.0, 4.0]);
        s.store(2, &c, 2..4).expect("fits");
        s.store(0, &c, 0..2).expect("fits");
        assert_eq!(s.0, Values::F64(vec![1.0, 2.0, 0.0, 0.0, 3.0, 4.0]));
        assert!(s.store(3, &c, 0..2).is_err());
    }
}
