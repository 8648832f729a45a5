//! Partitioning one product's C into rectangles, one per worker, with areas
//! in proportion to the workers' speeds and as little communication as
//! possible: a worker computing a rectangle of C of height h and width w
//! needs h rows of A and w columns of B, so the master sends
//! k·(h + w) values for it, and the sum of the half-perimeters is what to
//! make small. No rectangle can beat a square, so `2·Σ√a_i` (areas
//! normalised to a unit square) bounds every partition from below.
//!
//! The partitions here are *column-based* (Beaumont, Boudet, Rastello and
//! Robert, "Matrix multiplication on heterogeneous platforms", IEEE TPDS
//! 12(10), 2001): the square is cut into columns, each column into
//! rectangles of its full width. A column of width `W` holding areas
//! `a_1..a_m` (so `W = Σ a`) has half-perimeters summing to `m·W + 1`.
//! The paper shows that an optimal column-based partition puts the areas,
//! sorted, in consecutive groups, so a dynamic program over the sorted
//! areas finds it in O(p³); its sum is within 1.75 of the lower bound.
//! `lastovetsky-performance-analysis` (in the papers) restricts it further
//! to generalised blocks; the plain optimum is used here.
//!
//! Pure arithmetic: [`columns`] finds the arrangement for areas on the
//! unit square, [`arrange`] for an `n × m` matrix (columns of full height
//! or rows of full width, whichever costs less), [`tile`] turns it into
//! whole rows and columns of the matrix.

use crate::error::{Error, Result};

/// A rectangle of C: rows `row..row + height`, columns `col..col + width`,
/// for worker `worker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    pub worker: usize,
    pub row: usize,
    pub col: usize,
    pub height: usize,
    pub width: usize,
}

impl Rect {
    pub fn area(&self) -> usize {
        self.height * self.width
    }

    pub fn half_perimeter(&self) -> usize {
        self.height + self.width
    }
}

/// A column-based arrangement of normalised areas: each column's workers,
/// top to bottom, and the sum of half-perimeters it implies on the unit
/// square. `transposed`: the groups are rows of full width instead (the
/// better arrangement for a matrix much wider than tall).
#[derive(Debug, Clone, PartialEq)]
pub struct Columns {
    pub columns: Vec<Vec<usize>>,
    pub cost: f64,
    pub transposed: bool,
}

/// `2·Σ√a_i` for areas normalised to sum to 1: no partition of the unit
/// square into rectangles of these areas has a smaller sum of
/// half-perimeters.
pub fn lower_bound(areas: &[f64]) -> f64 {
    let total: f64 = areas.iter().sum();
    areas.iter().map(|a| 2.0 * (a / total).sqrt()).sum()
}

/// The sum of half-perimeters of `columns` for `areas` (normalised), on
/// the unit square: per column, its count times its width, plus 1.
pub fn cost(areas: &[f64], columns: &[Vec<usize>]) -> f64 {
    let total: f64 = areas.iter().sum();
    columns
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| c.len() as f64 * c.iter().map(|&i| areas[i] / total).sum::<f64>() + 1.0)
        .sum()
}

fn check(areas: &[f64]) -> Result<()> {
    if areas.is_empty() {
        return Err(Error::BadPartition("no worker to give a rectangle to".into()));
    }
    if let Some(a) = areas.iter().find(|a| !(a.is_finite() && **a > 0.0)) {
        return Err(Error::BadPartition(format!(
            "every area must be positive and finite (got {a})"
        )));
    }
    Ok(())
}

/// The half-perimeters of `groups` as columns of an `n × m` matrix (each
/// column its full height `n`, its width `m` times its share): per column
/// `n + count·m·width`.
pub fn cost_on(areas: &[f64], groups: &[Vec<usize>], n: f64, m: f64) -> f64 {
    let total: f64 = areas.iter().sum();
    groups
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| n + c.len() as f64 * m * c.iter().map(|&i| areas[i] / total).sum::<f64>())
        .sum()
}

/// The optimal column-based arrangement of `areas` (any positive scale)
/// on the unit square: the areas sorted, cut into consecutive groups by
/// dynamic programming. Columns are listed narrowest first.
pub fn columns(areas: &[f64]) -> Result<Columns> {
    groups_on(areas, 1.0, 1.0)
}

/// As [`columns`], for columns of an `n × m` matrix: a column costs
/// `n + count·m·width` (its heights sum to n, each rectangle is `m·width`
/// wide). The sorted-groups argument of Beaumont et al. holds for any
/// constant per column. `cost` stays the unit square's.
fn groups_on(areas: &[f64], n: f64, m: f64) -> Result<Columns> {
    check(areas)?;
    let total: f64 = areas.iter().sum();
    let mut order: Vec<usize> = (0..areas.len()).collect();
    order.sort_by(|&a, &b| areas[a].total_cmp(&areas[b]).then(a.cmp(&b)));
    let s: Vec<f64> = order.iter().map(|&i| areas[i] / total).collect();
    let p = s.len();
    let mut prefix = vec![0.0; p + 1];
    for i in 0..p {
        prefix[i + 1] = prefix[i] + s[i];
    }
    // best[i]: least cost of the first i sorted areas in whole columns;
    // cut[i]: where the last of those columns starts.
    let mut best = vec![f64::INFINITY; p + 1];
    let mut cut = vec![0usize; p + 1];
    best[0] = 0.0;
    for i in 1..=p {
        for k in 0..i {
            let column = (i - k) as f64 * m * (prefix[i] - prefix[k]) + n;
            if best[k] + column < best[i] {
                best[i] = best[k] + column;
                cut[i] = k;
            }
        }
    }
    let mut columns = Vec::new();
    let mut i = p;
    while i > 0 {
        let k = cut[i];
        columns.push(order[k..i].to_vec());
        i = k;
    }
    columns.reverse();
    let cost = cost(areas, &columns);
    Ok(Columns {
        cost,
        columns,
        transposed: false,
    })
}

/// The better of columns of full height and rows of full width for an
/// `n × m` matrix (ties go to columns).
pub fn arrange(areas: &[f64], n: usize, m: usize) -> Result<Columns> {
    let (nf, mf) = (n as f64, m as f64);
    let cols = groups_on(areas, nf, mf)?;
    let rows = groups_on(areas, mf, nf)?;
    if cost_on(areas, &rows.columns, mf, nf) < cost_on(areas, &cols.columns, nf, mf) {
        return Ok(Columns {
            transposed: true,
            ..rows
        });
    }
    Ok(cols)
}

/// Cut `total` into whole parts in proportion to `weights` (largest
/// remainders), each at least 1 when `total` allows.
fn split(total: usize, weights: &[f64]) -> Vec<usize> {
    let sum: f64 = weights.iter().sum();
    let exact: Vec<f64> = weights.iter().map(|w| total as f64 * w / sum).collect();
    let mut parts: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let left = total - parts.iter().sum::<usize>();
    let mut by_rest: Vec<usize> = (0..weights.len()).collect();
    by_rest.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    for &i in by_rest.iter().cycle().take(left) {
        parts[i] += 1;
    }
    // No empty part while another has two or more to spare.
    while let Some(z) = parts.iter().position(|&x| x == 0) {
        let Some(big) = (0..parts.len()).filter(|&i| parts[i] >= 2).max_by_key(|&i| parts[i]) else {
            break;
        };
        parts[big] -= 1;
        parts[z] += 1;
    }
    parts
}

/// Rectangles of an `n × m` matrix for the workers of `areas` (their
/// weights), arranged as [`columns`] says: column widths in proportion to
/// the column's areas, heights within a column in proportion to each
/// area, all in whole rows and columns. Every element of the matrix
/// belongs to exactly one rectangle. A worker may get an empty rectangle
/// when the matrix has fewer rows or columns than that needs.
pub fn tile(areas: &[f64], n: usize, m: usize) -> Result<(Columns, Vec<Rect>)> {
    if n == 0 || m == 0 {
        return Err(Error::BadPartition(format!("a {n}×{m} matrix has nothing to share")));
    }
    let arrangement = arrange(areas, n, m)?;
    if arrangement.transposed {
        // Rows of full width: tile the transpose, then turn it back.
        let mut rects = tile_columns(areas, &arrangement, m, n);
        for r in &mut rects {
            *r = Rect {
                worker: r.worker,
                row: r.col,
                col: r.row,
                height: r.width,
                width: r.height,
            };
        }
        return Ok((arrangement, rects));
    }
    let rects = tile_columns(areas, &arrangement, n, m);
    Ok((arrangement, rects))
}

/// The rectangles of `arrangement`'s columns on an `n × m` matrix.
fn tile_columns(areas: &[f64], arrangement: &Columns, n: usize, m: usize) -> Vec<Rect> {
    let widths = split(
        m,
        &arrangement
            .columns
            .iter()
            .map(|c| c.iter().map(|&i| areas[i]).sum())
            .collect::<Vec<f64>>(),
    );
    let mut rects = Vec::with_capacity(areas.len());
    let mut col = 0;
    for (members, &width) in arrangement.columns.iter().zip(&widths) {
        let heights = split(n, &members.iter().map(|&i| areas[i]).collect::<Vec<f64>>());
        let mut row = 0;
        for (&worker, &height) in members.iter().zip(&heights) {
            rects.push(Rect {
                worker,
                row,
                col,
                height,
                width,
            });
            row += height;
        }
        col += width;
    }
    rects.sort_by_key(|r| r.worker);
    rects
}
