//! When each transfer of the exchange crosses, when each worker has and
//! adds each panel, and when each band of C goes back: one timing rule
//! ([`time`]) for the exchange, as `timeline.rs` is for panels the master
//! sends alone.
//!
//! The layout. Every worker holds one rectangle of C. Its columns are cut
//! into `bands` (the same cut for every rectangle of a column of the
//! partition, which share their columns), computed one after another:
//! band q is a piece of C, added step by step along k (`steps`, common to
//! all) and returned after its last step while the next band is added. A
//! worker keeps A's rows of its rectangle from the first band for the
//! others, so A crosses once and each band needs only its columns of B.
//! A stage is one step of one band (stage `q·steps + s`); a worker's
//! panel of a stage is its row groups' parts (first band only) and its
//! column group's part of the band.
//!
//! The rule, one send of the master at a time ([`time`]): of each group's
//! next part (every member within its window, and holding at most two
//! bands of C), the one that can start first, to the member it reaches
//! first; the root passes it on to the other members as soon as it has
//! it, in their order, and in the order it received its parts.
//! - The master's sends start in order, on its lanes (one; up to
//!   [`Port::sends`] behind a shared full-duplex uplink), a value to
//!   worker i taking `port.per_value(send_i)`; returns cross the same way
//!   on lanes of their own (with `duplex`; else on the port itself).
//! - A worker receives one transfer at a time (its link down, `send` a
//!   value) and sends one at a time (its link up, `ret` a value: parts
//!   passed on and its returns); a value from worker i to j takes
//!   `max(ret_i, send_j)`. Workers reach each other without crossing the
//!   master's uplink (a switch).
//! - A worker holds at most `window` panels not yet added, and two bands
//!   of C: a part of stage t leaves the master once every member has
//!   added its panel t − window, and the first part of band q once every
//!   member has returned its band q − 2.
//! - A worker adds a panel once all its parts are in and the panel before
//!   is added; a band returns once its last panel is added.

use super::{Group, Part};
use crate::product::{even, Port, ProductWorker};
use crate::rectangles::Rect;
use std::ops::Range;

/// One transfer of a group's part at a stage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transfer {
    pub stage: usize,
    pub group: usize,
    /// The master (`None`), or the root passing the part on.
    pub from: Option<usize>,
    pub to: usize,
    pub values: u64,
    pub start: f64,
    pub end: f64,
}

/// A band of a rectangle's C back to the master.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Return {
    pub worker: usize,
    pub band: usize,
    pub values: u64,
    pub start: f64,
    pub end: f64,
}

/// The exchange's transfers and times.
#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeTiming {
    pub steps: Vec<Range<usize>>,
    pub bands: usize,
    pub groups: Vec<Group>,
    /// In the order the master starts its sends, each followed by the
    /// root's passing it on.
    pub transfers: Vec<Transfer>,
    /// Per worker (the platform's indices; empty for one without a
    /// rectangle), per stage: when its panel is wholly in, and added.
    pub arrived: Vec<Vec<f64>>,
    pub added: Vec<Vec<f64>>,
    /// In the order the master grants them.
    pub returns: Vec<Return>,
    pub makespan: f64,
}

impl ExchangeTiming {
    /// Stages: steps of every band.
    pub fn stages(&self) -> usize {
        self.steps.len() * self.bands
    }

    /// What group `g` carries at `stage`: its rows (first band only), or
    /// the band's columns of its columns.
    pub fn part(&self, g: usize, stage: usize) -> Part {
        part_of(&self.groups[g], self.bands, stage / self.steps.len())
    }

    /// Values the master sends (each part once): `k·(n + m)`.
    pub fn from_master(&self) -> u64 {
        self.transfers
            .iter()
            .filter(|t| t.from.is_none())
            .map(|t| t.values)
            .sum()
    }

    /// Values the workers pass among themselves.
    pub fn among_workers(&self) -> u64 {
        self.transfers
            .iter()
            .filter(|t| t.from.is_some())
            .map(|t| t.values)
            .sum()
    }
}

fn part_of(group: &Group, bands: usize, band: usize) -> Part {
    match &group.part {
        Part::Rows(r) => Part::Rows(r.clone()),
        Part::Cols(c) => Part::Cols(even(c.start, c.len(), bands)[band].clone()),
    }
}

/// Whether `rects` can be cut into `bands` column bands: every rectangle's
/// columns one column group (a column-based partition), at least `bands`
/// wide.
pub fn banded(rects: &[Rect], bands: usize) -> bool {
    bands == 1
        || rects.iter().all(|r| r.width >= bands)
            && super::groups(rects).iter().all(|g| match &g.part {
                Part::Cols(c) => g.members.iter().all(|&w| {
                    rects
                        .iter()
                        .any(|r| r.worker == w && r.col == c.start && r.width == c.len())
                }),
                Part::Rows(_) => true,
            })
}

/// What the rule tracks while transfers are placed one after another.
struct State<'a> {
    workers: &'a [ProductWorker],
    port: Port,
    window: usize,
    steps: usize,
    lane_free: Vec<f64>,
    ret_free: Vec<f64>,
    /// When the master's last send started: its sends start in order.
    started: f64,
    down_free: Vec<f64>,
    up_free: Vec<f64>,
    arrived: Vec<Vec<f64>>,
    added: Vec<Vec<f64>>,
    /// Per worker, per stage: parts still to come.
    missing: Vec<Vec<usize>>,
    /// Per worker, per band: when its return ended.
    returned: Vec<Vec<f64>>,
}

impl State<'_> {
    /// When the master could send a part of `stage` of `values` to
    /// `root`, every one of `members` within its window and bands; `None`
    /// until they are.
    fn start_of(&self, members: &[usize], root: usize, stage: usize, values: u64) -> Option<(f64, f64)> {
        let mut gate = 0.0f64;
        let (band, step) = (stage / self.steps, stage % self.steps);
        for &m in members {
            if let Some(before) = stage.checked_sub(self.window) {
                gate = gate.max(*self.added[m].get(before)?);
            }
            if step == 0 && band >= 2 {
                gate = gate.max(*self.returned[m].get(band - 2)?);
            }
        }
        let lane = self.lane_free.iter().copied().fold(f64::INFINITY, f64::min);
        let start = lane.max(self.started).max(self.down_free[root]).max(gate);
        Some((start, values as f64 * self.port.per_value(self.workers[root].send)))
    }

    /// The return lanes: their own with `duplex`, else the port's.
    fn ret_lanes(&mut self) -> &mut Vec<f64> {
        if self.port.duplex {
            &mut self.ret_free
        } else {
            &mut self.lane_free
        }
    }

    /// A part of `stage` is wholly at `to` at `end`; the panels now whole
    /// are added in order.
    fn arrive(&mut self, to: usize, stage: usize, end: f64, flops: impl Fn(usize) -> f64) {
        self.arrived[to][stage] = self.arrived[to][stage].max(end);
        self.missing[to][stage] -= 1;
        let mut at = self.added[to].len();
        while self.missing[to].get(at) == Some(&0) {
            let before = self.added[to].last().copied().unwrap_or(0.0);
            self.added[to].push(self.arrived[to][at].max(before) + flops(at) * self.workers[to].flop);
            at += 1;
        }
    }
}

/// The exchange of `rects` (one per worker, [`banded`] into `bands`) over
/// `steps` under the rule. A group's root is the member its part reaches
/// first; on a tie, the one due by its share of passing parts on, in
/// proportion to the speed of its link up. Of the groups, the part that
/// starts first; on a tie, the earlier stage, then the group listed
/// first. A return ready goes before a send that would start at the same
/// time.
pub fn time(
    workers: &[ProductWorker],
    rects: &[Rect],
    steps: &[Range<usize>],
    bands: usize,
    port: Port,
    window: usize,
) -> ExchangeTiming {
    let p = workers.len();
    let groups = super::groups(rects);
    let (nsteps, bands) = (steps.len(), bands.max(1));
    let stages = nsteps * bands;
    let lanes = port.at_once();
    let mut rect_of: Vec<Option<Rect>> = vec![None; p];
    let mut missing = vec![Vec::new(); p];
    for r in rects {
        rect_of[r.worker] = Some(*r);
        let rows = (groups.iter())
            .filter(|g| matches!(g.part, Part::Rows(_)) && g.members.contains(&r.worker))
            .count();
        let cols = (groups.iter())
            .filter(|g| matches!(g.part, Part::Cols(_)) && g.members.contains(&r.worker))
            .count();
        missing[r.worker] = (0..stages).map(|t| cols + if t < nsteps { rows } else { 0 }).collect();
    }
    // Flops of worker w's panel at stage t: its rows by the band's columns.
    let band_width = |w: usize, band: usize| {
        let r = rect_of[w].expect("a rectangle");
        even(r.col, r.width, bands)[band].len()
    };
    let flops = |w: usize, t: usize| {
        let r = rect_of[w].expect("a rectangle");
        2.0 * (r.height * band_width(w, t / nsteps) * steps[t % nsteps].len()) as f64
    };
    let mut st = State {
        workers,
        port: Port { sends: lanes, ..port },
        window: window.max(1),
        steps: nsteps,
        lane_free: vec![0.0; lanes],
        ret_free: vec![0.0; lanes],
        started: 0.0,
        down_free: vec![0.0; p],
        up_free: vec![0.0; p],
        arrived: (0..p)
            .map(|w| vec![0.0; if rect_of[w].is_some() { stages } else { 0 }])
            .collect(),
        added: vec![Vec::new(); p],
        missing,
        returned: vec![Vec::new(); p],
    };
    let weight = |w: usize| 1.0 / workers[w].ret.max(f64::MIN_POSITIVE);
    let mut credit: Vec<Vec<f64>> = groups.iter().map(|g| vec![0.0; g.members.len()]).collect();
    // Per group, its next stage (row groups: the first band's only).
    let mut next = vec![0usize; groups.len()];
    let last = |g: &Group| {
        if matches!(g.part, Part::Rows(_)) {
            nsteps
        } else {
            stages
        }
    };
    let mut transfers = Vec::new();
    let mut returns = Vec::new();
    loop {
        // A return ready: the earliest start.
        let mut ret: Option<(f64, usize, usize)> = None;
        for r in rects {
            let (w, band) = (r.worker, st.returned[r.worker].len());
            let Some(&ready) = st.added[w].get(band * nsteps + nsteps - 1).filter(|_| band < bands) else {
                continue;
            };
            let lane = st.ret_lanes().iter().copied().fold(f64::INFINITY, f64::min);
            let start = ready.max(lane).max(st.up_free[w]);
            if ret.is_none_or(|(s, _, _)| start < s) {
                ret = Some((start, w, band));
            }
        }
        // (start, due, stage, group, member index, length)
        let mut send: Option<(f64, f64, usize, usize, usize, f64)> = None;
        for (g, group) in groups.iter().enumerate() {
            let t = next[g];
            if t >= last(group) {
                continue;
            }
            let values = (part_of(group, bands, t / nsteps).len() * steps[t % nsteps].len()) as u64;
            // The member it reaches first (on a tie, the one due).
            let total: f64 = group.members.iter().map(|&m| weight(m)).sum();
            let mut root: Option<(f64, f64, f64, usize, f64)> = None;
            for (i, &m) in group.members.iter().enumerate() {
                let Some((start, len)) = st.start_of(&group.members, m, t, values) else {
                    continue;
                };
                let due = -(credit[g][i] + weight(m)) / total;
                if root.is_none_or(|r| (start + len, due) < (r.0, r.1)) {
                    root = Some((start + len, due, start, i, len));
                }
            }
            let Some((_, due, start, i, len)) = root else { continue };
            let key = (start, due, t, g, i, len);
            if send.is_none_or(|b| (key.0, key.2, key.3) < (b.0, b.2, b.3)) {
                send = Some(key);
            }
        }
        match (ret, send) {
            (Some((start, w, band)), s) if s.is_none_or(|s| start <= s.0) => {
                let values = (rect_of[w].expect("a rectangle").height * band_width(w, band)) as u64;
                let end = start + values as f64 * st.port.per_value(workers[w].ret);
                let lanes = st.ret_lanes();
                let lane = (0..lanes.len())
                    .min_by(|&a, &b| lanes[a].total_cmp(&lanes[b]))
                    .unwrap_or(0);
                lanes[lane] = end;
                st.up_free[w] = end;
                st.returned[w].push(end);
                returns.push(Return {
                    worker: w,
                    band,
                    values,
                    start,
                    end,
                });
            }
            (_, Some((start, _, t, g, i, len))) => {
                let group = &groups[g];
                let root = group.members[i];
                let total: f64 = group.members.iter().map(|&m| weight(m)).sum();
                for (c, &m) in credit[g].iter_mut().zip(&group.members) {
                    *c += weight(m);
                }
                credit[g][i] -= total;
                next[g] += 1;
                let values = (part_of(group, bands, t / nsteps).len() * steps[t % nsteps].len()) as u64;
                let end = start + len;
                let lane = (0..lanes)
                    .min_by(|&a, &b| st.lane_free[a].total_cmp(&st.lane_free[b]))
                    .unwrap_or(0);
                (st.lane_free[lane], st.started, st.down_free[root]) = (end, start, end);
                st.arrive(root, t, end, |at| flops(root, at));
                transfers.push(Transfer {
                    stage: t,
                    group: g,
                    from: None,
                    to: root,
                    values,
                    start,
                    end,
                });
                for &to in group.members.iter().filter(|&&m| m != root) {
                    let start = end.max(st.up_free[root]).max(st.down_free[to]);
                    let fwd = start + values as f64 * workers[root].ret.max(workers[to].send);
                    (st.up_free[root], st.down_free[to]) = (fwd, fwd);
                    st.arrive(to, t, fwd, |at| flops(to, at));
                    transfers.push(Transfer {
                        stage: t,
                        group: g,
                        from: Some(root),
                        to,
                        values,
                        start,
                        end: fwd,
                    });
                }
            }
            (_, None) => break,
        }
    }
    let makespan = (returns.iter().map(|r| r.end))
        .chain(st.added.iter().flatten().copied())
        .fold(0.0, f64::max);
    ExchangeTiming {
        steps: steps.to_vec(),
        bands,
        groups,
        transfers,
        arrived: st.arrived,
        added: st.added,
        returns,
        makespan,
    }
}

#[cfg(test)]
mod tests;
