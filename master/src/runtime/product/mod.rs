//! One large product C = A·B run over the pool: its matrices (in memory
//! or read from `.npy` files where the values lie, C or Fortran order),
//! the panels the master sends (A's rows and B's columns of a piece, a
//! range of k deep), where the pieces of C go, and the checks of each
//! piece (`check`); `shell` carries out the commands of
//! [`dls_core::product::ProductMachine`].

pub mod check;
pub(crate) mod link;
pub mod shell;

use crate::runtime::data::{Slab, Source};
use anyhow::{bail, Result};
use dls_lp::rectangles::Rect;
use dls_protocol::{DType, Values};
use std::io;
use std::ops::Range;
use std::sync::Arc;

/// A matrix of `rows × cols` values in a source: row-major, or column-major
/// (`fortran`: the source holds its transpose, row-major).
#[derive(Debug, Clone)]
pub struct Matrix {
    pub source: Source,
    pub rows: usize,
    pub cols: usize,
    pub fortran: bool,
}

impl Matrix {
    /// `name` is for messages ("A", "B").
    pub fn new(name: &str, source: Source, rows: usize, cols: usize, fortran: bool) -> Result<Matrix> {
        match rows.checked_mul(cols) {
            Some(len) if len == source.len() => Ok(Matrix {
                source,
                rows,
                cols,
                fortran,
            }),
            _ => bail!(
                "{name} holds {} values, not the {rows}×{cols} of its shape",
                source.len()
            ),
        }
    }

    /// A row-major matrix in memory.
    pub fn in_memory(name: &str, values: Values, rows: usize, cols: usize) -> Result<Matrix> {
        Matrix::new(name, Source::Memory(Arc::new(values)), rows, cols, false)
    }

    pub fn dtype(&self) -> DType {
        self.source.dtype()
    }

    /// Rows `r` and columns `c` of the matrix, row-major, written into
    /// `out` (of the matrix's type) from value `at` on.
    pub fn block_at(&self, r: Range<usize>, c: Range<usize>, out: &mut Values, at: usize) -> io::Result<()> {
        let (h, w) = (r.len(), c.len());
        if r.end > self.rows || c.end > self.cols || at.checked_add(h * w).is_none_or(|end| end > out.len()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "block {r:?}×{c:?} of a {}×{} matrix at {at} of {}",
                    self.rows,
                    self.cols,
                    out.len()
                ),
            ));
        }
        if !self.fortran {
            for (j, i) in r.enumerate() {
                let row = i * self.cols;
                self.source.read_at(row + c.start..row + c.end, out, at + j * w)?;
            }
            return Ok(());
        }
        // Column-major: read each column's segment, then lay it in rows.
        for (j, col) in c.enumerate() {
            let seg = self.source.read(col * self.rows + r.start..col * self.rows + r.end)?;
            for i in 0..h {
                set(out, at + i * w + j, &seg, i);
            }
        }
        Ok(())
    }
}

/// `out[at] = slab[i]` (same type).
fn set(out: &mut Values, at: usize, slab: &Slab, i: usize) {
    let (v, base) = match slab {
        Slab::View(v, r) => (&**v, r.start),
        Slab::Owned(v) => (v, 0),
    };
    match (out, v) {
        (Values::F32(o), Values::F32(s)) => o[at] = s[base + i],
        (Values::F64(o), Values::F64(s)) => o[at] = s[base + i],
        _ => {}
    }
}

/// One product's matrices: A (n×k) and B (k×m), of one type.
#[derive(Debug, Clone)]
pub struct ProductJob {
    pub a: Matrix,
    pub b: Matrix,
}

impl ProductJob {
    pub fn new(a: Matrix, b: Matrix) -> Result<ProductJob> {
        if a.cols != b.rows {
            bail!(
                "A is {}×{} and B {}×{}: A's columns must be as many as B's rows",
                a.rows,
                a.cols,
                b.rows,
                b.cols
            );
        }
        if a.dtype() != b.dtype() {
            bail!(
                "A holds {} values and B {}: both must be of one type",
                a.dtype(),
                b.dtype()
            );
        }
        if a.rows == 0 || a.cols == 0 || b.cols == 0 {
            bail!(
                "a product of {}×{} by {}×{} has nothing to compute",
                a.rows,
                a.cols,
                b.rows,
                b.cols
            );
        }
        Ok(ProductJob { a, b })
    }

    /// Random A and B in [-1, 1) from a seed.
    pub fn random(n: usize, k: usize, m: usize, dtype: DType, seed: u64) -> Result<ProductJob> {
        let make = |len: usize, seed: u64| {
            let mut v = Values::try_zeros(dtype, len)
                .ok_or_else(|| anyhow::anyhow!("no memory for {len} values of {dtype}"))?;
            dls_common::matrix::fill_random_values(&mut v, seed);
            anyhow::Ok(v)
        };
        ProductJob::new(
            Matrix::in_memory("A", make(n * k, seed)?, n, k)?,
            Matrix::in_memory("B", make(k * m, seed ^ 0x9e37_79b9)?, k, m)?,
        )
    }

    pub fn dtype(&self) -> DType {
        self.a.dtype()
    }

    /// (n, k, m).
    pub fn dims(&self) -> (usize, usize, usize) {
        (self.a.rows, self.a.cols, self.b.cols)
    }

    /// The panel `ks` of `rect`: A's rows of the rectangle and columns
    /// `ks`, then B's rows `ks` and columns of the rectangle, row-major.
    pub fn panel(&self, rect: &Rect, ks: Range<usize>) -> io::Result<Values> {
        self.panel_into(rect, ks, None)
    }

    /// [`ProductJob::panel`], in `spare` (a panel let go) where it is of
    /// the product's type and large enough: a panel's memory is then
    /// neither mapped nor zeroed again.
    pub fn panel_into(&self, rect: &Rect, ks: Range<usize>, spare: Option<Values>) -> io::Result<Values> {
        let a_len = rect.height * ks.len();
        let len = a_len + rect.width * ks.len();
        let mut v = match spare {
            Some(mut v) if v.dtype() == self.dtype() && v.capacity() >= len => {
                v.resize(len);
                v
            }
            _ => Values::try_zeros(self.dtype(), len)
                .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, format!("a panel of {len} values")))?,
        };
        self.a
            .block_at(rect.row..rect.row + rect.height, ks.clone(), &mut v, 0)?;
        self.b.block_at(ks, rect.col..rect.col + rect.width, &mut v, a_len)?;
        Ok(v)
    }
}

/// Where the pieces of C go, each rectangle as it arrives.
pub trait Blocks: Send {
    /// `c` holds `rect` of C, row-major.
    fn store_block(&mut self, rect: &Rect, c: &Values) -> io::Result<()>;
}

/// C in memory, n×m row-major.
pub struct MemoryC {
    pub c: Values,
    pub m: usize,
}

impl Blocks for MemoryC {
    fn store_block(&mut self, rect: &Rect, c: &Values) -> io::Result<()> {
        for i in 0..rect.height {
            let at = (rect.row + i) * self.m + rect.col;
            self.c
                .copy_range_in(at, c, i * rect.width..(i + 1) * rect.width)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        }
        Ok(())
    }
}

/// C not kept.
impl Blocks for crate::runtime::data::Discard {
    fn store_block(&mut self, _: &Rect, _: &Values) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::data::InputFile;

    /// The panel as the definition reads: A[rows, ks] then B[ks, cols], row-major.
    fn by_hand(a: &[f64], b: &[f64], (k, m): (usize, usize), rect: &Rect, ks: Range<usize>) -> Vec<f64> {
        let mut v = Vec::new();
        for i in rect.row..rect.row + rect.height {
            v.extend(ks.clone().map(|j| a[i * k + j]));
        }
        for j in ks {
            v.extend((rect.col..rect.col + rect.width).map(|c| b[j * m + c]));
        }
        v
    }

    fn file_of(values: &[f64], name: &str) -> Source {
        let path = std::env::temp_dir().join(format!("dls-panel-{}-{name}", std::process::id()));
        let mut bytes = vec![0u8; 5];
        values.iter().for_each(|x| bytes.extend(x.to_le_bytes()));
        std::fs::write(&path, bytes).expect("a temporary file");
        let file = std::fs::File::open(&path).expect("opens");
        let _ = std::fs::remove_file(&path);
        Source::File(Arc::new(InputFile {
            file,
            path,
            prefix: 5,
            dtype: DType::F64,
            big_endian: false,
            len: values.len(),
        }))
    }

    #[test]
    fn a_panel_is_its_rows_of_a_then_its_columns_of_b_from_any_source_and_in_any_spare() {
        let (n, k, m) = (5, 4, 3);
        let a: Vec<f64> = (0..n * k).map(|x| x as f64).collect();
        let b: Vec<f64> = (0..k * m).map(|x| 100.0 + x as f64).collect();
        let transpose = |v: &[f64], r: usize, c: usize| -> Vec<f64> {
            (0..c)
                .flat_map(|j| (0..r).map(move |i| (i, j)))
                .map(|(i, j)| v[i * c + j])
                .collect()
        };
        let memory = |v: &[f64]| Source::Memory(Arc::new(Values::F64(v.to_vec())));
        let jobs = [
            (memory(&a), memory(&b), false),
            (file_of(&a, "a"), file_of(&b, "b"), false),
            (memory(&transpose(&a, n, k)), file_of(&transpose(&b, k, m), "bt"), true),
        ];
        let rect = Rect {
            worker: 0,
            row: 1,
            col: 1,
            height: 3,
            width: 2,
        };
        for (sa, sb, fortran) in jobs {
            let job = ProductJob::new(
                Matrix::new("A", sa, n, k, fortran).expect("shape"),
                Matrix::new("B", sb, k, m, fortran).expect("shape"),
            )
            .expect("a product");
            for ks in [0..4, 1..3, 3..4] {
                let want = Values::F64(by_hand(&a, &b, (k, m), &rect, ks.clone()));
                assert_eq!(job.panel(&rect, ks.clone()).expect("reads"), want, "{ks:?}");
                // A spare panel larger than this one, full of other values;
                // one too small; one of the other type.
                for spare in [
                    Values::F64(vec![-7.0; 40]),
                    Values::F64(vec![-7.0; 1]),
                    Values::F32(vec![-7.0; 40]),
                ] {
                    let got = job.panel_into(&rect, ks.clone(), Some(spare)).expect("reads");
                    assert_eq!(got, want, "{ks:?}");
                }
            }
            let outside = Rect { height: 5, ..rect };
            assert!(job.panel(&outside, 0..1).is_err(), "rows past A's end");
            assert!(job.panel(&rect, 3..5).is_err(), "k past A's columns");
        }
    }
}
