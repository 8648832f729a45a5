//! The steady state behind a shared uplink as its port admits transfers.
//! The bound ([`crate::bound::steady_state_uplink`]) lets every worker's
//! transfers flow beside every other's, each taking its share of the
//! uplink (the uplink's rate over its link's): the relaxation a lower
//! bound needs, and what a plan whose paces make the shares fit can
//! reach. The port itself starts a transfer only when its share fits in
//! what those under way leave (`Ports::transfer`, the executor's port):
//! a worker whose link nearly fills the uplink sends alone, and another
//! whose share does not fit beside it can send only while it does not.
//! Sharing products out again in a run (online correction) on the bound's
//! rates then hands such a worker products it can only take from the
//! first one's time: on the switched test bed, a correction that moved 45
//! products to the second-fastest link this way ran 17.8 s against 12.5 s
//! for one that moved 12.
//!
//! Here each worker, the fastest links first, gets what its processor and
//! links allow, within what the uplink has left (as in the bound), and
//! within the time of its lane that the workers already served whose
//! transfers it does not fit beside leave free: a sure rate, since those
//! cannot run beside it anyway, and the bound's own when every share fits
//! beside every other. Whole shares only: where a transfer starts in the
//! room another leaves ([`crate::lane`]) the port carries more than this
//! says, so online correction shares products out conservatively.

use crate::bound::SteadyState;
use crate::platform::{Platform, Worker};
use crate::schedule::Uplink;

/// Shares that add up to at most this much above 1 fit (the port's own
/// slack for rounding).
const FIT: f64 = 1e-9;

/// A worker's transfer of one unit one way: the lane's seconds it takes
/// (the slower of its link and the uplink) and its share of the lane.
#[derive(Debug, Clone, Copy)]
struct Way {
    secs: f64,
    share: f64,
}

fn way(w: &Worker, uplink: Uplink, send: bool) -> Way {
    let (link, up) = if send { (w.c, uplink.send) } else { (w.d, uplink.ret) };
    let secs = link.max(up);
    Way {
        secs,
        share: if secs > 0.0 { up / secs } else { 0.0 },
    }
}

/// The rates the port reaches behind `uplink` (see the module).
pub fn steady_state_admitted(platform: &Platform, uplink: Uplink) -> SteadyState {
    let wk = platform.workers();
    let cap: Vec<f64> = wk.iter().map(|w| 1.0 / w.w.max(w.c).max(w.d)).collect();
    let ways: Vec<[Way; 2]> = wk
        .iter()
        .map(|w| [way(w, uplink, true), way(w, uplink, false)])
        .collect();
    // The least time of a lane a unit first: where transfers take turns,
    // the lane's time is what is shared out (a knapsack), and where they
    // all fit at once the order does not matter.
    let key: Vec<f64> = (ways.iter())
        .map(|[s, r]| {
            if uplink.duplex {
                s.secs.max(r.secs)
            } else {
                s.secs + r.secs
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..wk.len()).collect();
    order.sort_by(|&a, &b| {
        key[a]
            .total_cmp(&key[b])
            .then(cap[b].total_cmp(&cap[a]))
            .then(a.cmp(&b))
    });
    // The lanes: sends and returns each their own (full duplex), or one
    // for both.
    let lanes: &[&[usize]] = if uplink.duplex { &[&[0], &[1]] } else { &[&[0, 1]] };
    let mut left = if uplink.duplex {
        1.0 / uplink.send.max(uplink.ret)
    } else {
        1.0 / (uplink.send + uplink.ret)
    };
    let mut alpha = vec![0.0; wk.len()];
    let mut served: Vec<usize> = Vec::new();
    for i in order {
        let mut a = cap[i].min(left);
        for lane in lanes {
            let need: f64 = lane.iter().map(|&k| ways[i][k].secs).sum();
            // The time of this lane taken by transfers `i`'s do not fit beside.
            let apart = |j: usize, k: usize| lane.iter().any(|&m| ways[i][m].share + ways[j][k].share > 1.0 + FIT);
            let busy: f64 = (served.iter())
                .flat_map(|&j| lane.iter().map(move |&k| (j, k)))
                .filter(|&(j, k)| apart(j, k))
                .map(|(j, k)| alpha[j] * ways[j][k].secs)
                .sum();
            if need > 0.0 {
                a = a.min((1.0 - busy).max(0.0) / need);
            }
        }
        alpha[i] = a.max(0.0);
        left = (left - alpha[i]).max(0.0);
        served.push(i);
    }
    SteadyState::of(alpha)
}
