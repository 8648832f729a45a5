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

    /// Rows `r` and columns `c` of the matrix, row-major, appended to `out`
    /// (of the matrix's type).
    pub fn block_into(&self, r: Range<usize>, c: Range<usize>, out: &mut Values) -> io::Result<()> {
        if r.end > self.rows || c.end > self.cols {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("block {r:?}×{c:?} of a {}×{} matrix", self.rows, self.cols),
            ));
        }
        if !self.fortran {
            for i in r {
                let at = i * self.cols;
                match &self.source {
                    Source::File(f) => f.read_onto(at + c.start..at + c.end, out)?,
                    other => append(out, &other.read(at + c.start..at + c.end)?),
                }
            }
            return Ok(());
        }
        // Column-major: read each column's segment, then lay them in rows.
        let (h, w) = (r.len(), c.len());
        let cols: Vec<Slab> = c
            .map(|j| self.source.read(j * self.rows + r.start..j * self.rows + r.end))
            .collect::<io::Result<_>>()?;
        let start = out.len();
        append(out, &Slab::Owned(Values::zeros(self.dtype(), h * w)));
        for (j, col) in cols.iter().enumerate() {
            for i in 0..h {
                set(out, start + i * w + j, col, i);
            }
        }
        Ok(())
    }
}

/// Append a slab's values to `out` (same type).
fn append(out: &mut Values, slab: &Slab) {
    let owned;
    let (v, range) = match slab {
        Slab::View(v, r) => (&**v, r.clone()),
        Slab::Owned(v) => {
            owned = v;
            (owned, 0..owned.len())
        }
    };
    match (out, v) {
        (Values::F32(o), Values::F32(s)) => o.extend_from_slice(&s[range]),
        (Values::F64(o), Values::F64(s)) => o.extend_from_slice(&s[range]),
        (o, s) => debug_assert!(false, "{} into {}", s.dtype(), o.dtype()),
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
        let len = (rect.height + rect.width) * ks.len();
        let mut v = match self.dtype() {
            DType::F32 => Values::F32(Vec::with_capacity(len)),
            DType::F64 => Values::F64(Vec::with_capacity(len)),
        };
        self.a
            .block_into(rect.row..rect.row + rect.height, ks.clone(), &mut v)?;
        self.b.block_into(ks, rect.col..rect.col + rect.width, &mut v)?;
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
