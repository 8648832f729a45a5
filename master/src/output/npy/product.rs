//! One large product from two rank-2 `.npy` files: A (n, k) and B (k, m),
//! read where the values lie as panels go out (C or Fortran order, either
//! byte order), never whole.

use super::{file_source, open, Expect, Layout};
use crate::runtime::product::{Matrix, ProductJob};
use anyhow::{bail, Context, Result};
use std::path::Path;

/// A and B of one product, if both files are rank 2 (`None`: a batch);
/// both headers are checked against `want` (the type, and --shape when
/// given) before any value is read.
pub fn read_product(a: &Path, b: &Path, want: &Expect) -> Result<Option<ProductJob>> {
    let (fa, la) = open(a)?;
    let (fb, lb) = open(b)?;
    if la.count.is_some() || lb.count.is_some() {
        return Ok(None);
    }
    for (path, l) in [(a, &la), (b, &lb)] {
        if let Some(d) = want.dtype.filter(|&d| d != l.dtype) {
            bail!("--dtype {d}, but {} holds {} values", path.display(), l.dtype);
        }
    }
    if let Some(s) = want.shape {
        let (n, k, m) = (s.n as usize, s.k as usize, s.m as usize);
        if (la.rows, la.cols, lb.rows, lb.cols) != (n, k, k, m) {
            bail!(
                "{} {},{},{} disagrees with {} ({}×{}) and {} ({}×{})",
                want.shape_flag.unwrap_or("--shape"),
                s.n,
                s.k,
                s.m,
                a.display(),
                la.rows,
                la.cols,
                b.display(),
                lb.rows,
                lb.cols
            );
        }
    }
    let matrix = |name: &str, f: std::fs::File, l: &Layout, path: &Path| {
        Matrix::new(name, file_source(f, l, path), l.rows, l.cols, l.order.fortran)
    };
    let job = ProductJob::new(matrix("A", fa, &la, a)?, matrix("B", fb, &lb, b)?)
        .with_context(|| format!("{} and {}", a.display(), b.display()))?;
    Ok(Some(job))
}
