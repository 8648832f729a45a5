//! Panels passed among the workers of one product, so that the master's
//! uplink carries A and B once: the exchange of the 2-D algorithm
//! (`lastovetsky-performance-analysis`, Fig. 1 and 5: at each step the
//! pivot column of A is broadcast along the partition's rows, the pivot
//! row of B along its columns), with the master as the only holder of A
//! and B at the start.
//!
//! The rows of A (and the columns of B) fall into groups: stretches of
//! rows needed by the same workers (those whose rectangles cover them; in
//! a column-based partition, one worker of each column). At every step
//! the master sends a group's part of the panel to one of its members,
//! the step's root, which sends it on to the others. So every value of
//! the panel leaves the master once and reaches each worker that needs it
//! once: the master sends `n + m` values a unit of depth, the workers
//! `Σ(h + w) − (n + m)` among themselves, the least any exchange can when
//! the master alone holds A and B.
//!
//! The root of a group moves from step to step among its members (as the
//! paper remarks, broadcasts of successive steps with different roots can
//! run at once), each member a root in proportion to its weight (the
//! speed of its link up: a member forwards `s − 1` copies of the part in
//! the steps it is root): smooth weighted round robin, so that after any
//! number of steps each member has been root within one step of its share.

use crate::rectangles::Rect;
use std::ops::Range;

pub mod plan;
pub mod timing;

/// What a group carries: rows of A or columns of B, for the step's depth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Rows(Range<usize>),
    Cols(Range<usize>),
}

impl Part {
    /// Rows (or columns) in it: values per unit of depth.
    pub fn len(&self) -> usize {
        match self {
            Part::Rows(r) | Part::Cols(r) => r.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Rows (or columns) needed by the same workers: `members`, in the order
/// of the rectangles.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub part: Part,
    pub members: Vec<usize>,
}

/// One transfer of a step: `part` from the master (`from: None`) or a
/// worker to a worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    pub from: Option<usize>,
    pub to: usize,
    pub part: Part,
}

/// The groups of `rects` (a partition of C): the rows of A, then the
/// columns of B, each cut where some rectangle starts or ends and joined
/// again where neighbours are needed by the same workers.
pub fn groups(rects: &[Rect]) -> Vec<Group> {
    let mut out = cut(rects, |r| (r.row, r.row + r.height), Part::Rows);
    out.extend(cut(rects, |r| (r.col, r.col + r.width), Part::Cols));
    out
}

fn cut(rects: &[Rect], span: impl Fn(&Rect) -> (usize, usize), part: fn(Range<usize>) -> Part) -> Vec<Group> {
    let mut points: Vec<usize> = rects.iter().flat_map(|r| [span(r).0, span(r).1]).collect();
    points.sort_unstable();
    points.dedup();
    let mut out: Vec<(Range<usize>, Vec<usize>)> = Vec::new();
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        let members: Vec<usize> = (rects.iter())
            .filter(|r| span(r).0 <= a && b <= span(r).1)
            .map(|r| r.worker)
            .collect();
        if members.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((range, m)) if range.end == a && *m == members => range.end = b,
            _ => out.push((a..b, members)),
        }
    }
    out.into_iter()
        .map(|(range, members)| Group {
            part: part(range),
            members,
        })
        .collect()
}

/// The exchange of a partition: its groups and, step after step, each
/// group's root.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub groups: Vec<Group>,
    /// Per group, each member's weight and its credit in the round robin.
    weights: Vec<Vec<f64>>,
    credit: Vec<Vec<f64>>,
}

impl Exchange {
    /// The exchange of `rects`, each worker a root in proportion to
    /// `weight(worker)` (positive; the speed of its link up, say).
    pub fn new(rects: &[Rect], weight: impl Fn(usize) -> f64) -> Exchange {
        let groups = groups(rects);
        let weights: Vec<Vec<f64>> = (groups.iter())
            .map(|g| g.members.iter().map(|&w| weight(w).max(f64::MIN_POSITIVE)).collect())
            .collect();
        let credit = weights.iter().map(|w| vec![0.0; w.len()]).collect();
        Exchange {
            groups,
            weights,
            credit,
        }
    }

    /// The next step's transfers: per group, the master to its root, then
    /// the root to each other member.
    pub fn step(&mut self) -> Vec<Hop> {
        let mut hops = Vec::new();
        for (g, group) in self.groups.iter().enumerate() {
            let (weights, credit) = (&self.weights[g], &mut self.credit[g]);
            let total: f64 = weights.iter().sum();
            for (c, w) in credit.iter_mut().zip(weights) {
                *c += w;
            }
            let at = (0..credit.len())
                .max_by(|&a, &b| credit[a].total_cmp(&credit[b]).then(b.cmp(&a)))
                .expect("a group has members");
            credit[at] -= total;
            let root = group.members[at];
            hops.push(Hop {
                from: None,
                to: root,
                part: group.part.clone(),
            });
            for &m in group.members.iter().filter(|&&m| m != root) {
                hops.push(Hop {
                    from: Some(root),
                    to: m,
                    part: group.part.clone(),
                });
            }
        }
        hops
    }
}

#[cfg(test)]
mod tests;
