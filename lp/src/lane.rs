//! How transfers share a lane of a shared uplink ([`crate::Ports::Shared`]):
//! when one may start, and when it then ends.
//!
//! A transfer's *share* is what it takes of the lane at its link's full
//! rate (the uplink's cost a unit over its own). Whenever the shares of the
//! transfers under way fit (add up to 1 or less), each runs at its link's
//! rate. A transfer whose whole share does not fit beside those under way
//! may still start while they hold less than [`FILL`] of the lane, [`ROOM`]
//! at least left below it: it runs at the rate of what they leave below
//! [`FILL`], and faster as the transfers started before it end, which keep
//! theirs (the first started are served first). So a transfer's end is
//! known when it starts, the lane is not left idle while a transfer that
//! could use it waits, and no transfer under way is slowed by one started
//! after it.
//!
//! Why: a worker whose link nearly fills the uplink, or whose node cannot
//! take its chunks as fast as its link could, left the rest of the uplink
//! idle while it was served, since no other worker's whole share fitted
//! beside it; TCP shares what is left between the transfers at once. On the
//! switched test bed (`a:60:40 b:120:10 c:240:30 d:480:20`, products of
//! 384×384, one calibration, runs in turn) the fastest link's node, on a
//! fifth of a core, took its chunks more slowly than its link; letting the
//! second link's transfers start beside it (the whole lane fillable, from
//! 10% free) cut runs from 14.9-15.2 s to 10.4-11.4 s, and with [`FILL`]
//! and [`ROOM`] as they are, the star ran in 0.65× the time of Dask
//! distributed's best setting (`docs/experiments/peer-dask/`).
//!
//! The runtime's port ([`admits`]) and the planner's timeline (the shared
//! lane of [`crate::sequence`], with [`end`]) follow these rules alike.

use crate::tol::SHARE_EPS;

/// Share of a lane that transfers started in the room others leave may
/// fill: TCP shares what is left between transfers at once, but a lane
/// filled to its measured rate keeps its queues full, where the
/// acknowledgements of the other direction wait (the margin paced sends
/// keep too, [`crate::pace::HEADROOM`]). On the switched test bed (star
/// `a:120:10 b:240:20 c:240:30 d:300:40`, n = 256, uplink 1.6× the fastest
/// link, one calibration, runs in turn) plans filling the whole lane ran
/// 1.09-1.24× their predictions, at 0.85 0.94-1.15×, as fast.
pub const FILL: f64 = 0.85;

/// Least share of a lane, below [`FILL`], at which a transfer whose whole
/// share does not fit may start (at that rate at first). Less would start
/// transfers that crawl, each holding its worker's link for long.
pub const ROOM: f64 = 0.05;

/// Whether a transfer of `share` may start on a lane whose transfers
/// under way hold `used` (their whole shares added up): all of it fits, or
/// [`ROOM`] of the lane at least is free below [`FILL`].
pub fn admits(used: f64, share: f64) -> bool {
    used + share <= 1.0 + SHARE_EPS || used + share.min(ROOM) <= FILL + SHARE_EPS
}

/// The rate, as a share of its full rate, of a transfer of `share` beside
/// transfers started before it holding `before` of the lane.
pub fn rate(share: f64, before: f64) -> f64 {
    if before + share <= 1.0 + SHARE_EPS {
        1.0
    } else {
        (FILL - before).clamp(0.0, share) / share
    }
}

/// When a transfer that takes `secs` at its link's full rate (its whole
/// `share` of the lane) ends, started at `start` beside the transfers
/// `before` it (each its end and share; those over by `start` are
/// ignored): at each instant at the rate the module says.
pub fn end(start: f64, secs: f64, share: f64, before: &[(f64, f64)]) -> f64 {
    let mut under_way: Vec<(f64, f64)> = before.iter().copied().filter(|f| f.0 > start).collect();
    let held = |fs: &[(f64, f64)]| fs.iter().map(|f| f.1).sum::<f64>();
    if share <= 0.0 || rate(share, held(&under_way)) >= 1.0 {
        return start + secs;
    }
    under_way.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Work left, in seconds at the full rate; the rate only grows as the
    // transfers before it end.
    let (mut left, mut t) = (secs, start);
    for k in 0..under_way.len() {
        let r = rate(share, held(&under_way[k..]));
        let until = under_way[k].0;
        if r > 0.0 && r * (until - t) >= left {
            return t + left / r;
        }
        left -= r * (until - t);
        t = until;
    }
    t + left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_that_fits_runs_at_its_links_rate() {
        assert!(admits(0.5, 0.5) && admits(0.0, 1.0));
        assert_eq!(end(2.0, 3.0, 0.5, &[(9.0, 0.5)]), 5.0);
        // Transfers over by the start take nothing.
        assert_eq!(end(2.0, 3.0, 0.8, &[(2.0, 0.9), (1.0, 1.0)]), 5.0);
    }

    #[test]
    fn a_transfer_that_does_not_fit_takes_the_room_left_then_more() {
        // 0.7 of the lane held: a transfer of share 0.6 may start and runs
        // at (0.85 - 0.7) / 0.6 = a quarter of its rate until the one under
        // way ends at 1.0, then at its full rate: 0.25 s of its work by 1.0,
        // the other 1.75 s after.
        assert!(admits(0.7, 0.6));
        assert!((end(0.0, 2.0, 0.6, &[(1.0, 0.7)]) - 2.75).abs() < 1e-12);
        // Two under way, ending at 1 and 2, holding 0.5 and 0.3: share 0.5
        // at 0.05 / 0.5 = 0.1 of its rate until 1 (0.1 s of work), then it
        // fits beside the other: 1.4 s more at its full rate.
        assert!((end(0.0, 1.5, 0.5, &[(2.0, 0.3), (1.0, 0.5)]) - 2.4).abs() < 1e-12);
        // Ending before the first frees the lane: at the room's rate.
        assert!((end(0.0, 0.05, 0.5, &[(2.0, 0.3), (1.0, 0.5)]) - 0.5).abs() < 1e-12);
        // Held at FILL or more (admitted by another rule): no progress until
        // something ends.
        assert!((end(0.0, 1.0, 0.5, &[(1.0, 0.9)]) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn too_little_room_waits() {
        assert!(!admits(0.95, 0.5));
        assert!(admits(0.8, 0.3) && !admits(0.81, 0.3));
        // A share that fits whole needs only itself.
        assert!(admits(0.95, 0.05) && !admits(0.96, 0.05));
        // Whole ports (every share 1): one transfer at a time, as before.
        assert!(!admits(1.0, 1.0) && admits(0.0, 1.0));
    }
}
