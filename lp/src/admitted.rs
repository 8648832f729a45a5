//! The steady state behind a shared uplink as its port admits transfers.
//! The bound ([`crate::bound::steady_state_uplink`]) lets every worker's
//! transfers flow beside every other's, each taking its share of the
//! uplink (the uplink's rate over its link's): the relaxation a lower
//! bound needs, and what a plan whose paces make the shares fit can
//! reach. The port itself runs a transfer at its link's rate only when
//! its share fits in what those under way leave, and otherwise starts it
//! only in the room they leave below `TUNING.fill`, slower
//! ([`crate::lane`], the executor's port): beside a worker whose link
//! nearly fills the uplink, another whose share does not fit gets little
//! or nothing. Sharing products out again in a run (online correction)
//! on the bound's rates then hands such a worker products it can only
//! take from the first one's time: on the switched test bed, a
//! correction that moved 45 products to the second-fastest link this way
//! ran 17.8 s against 12.5 s for one that moved 12 (when the port started
//! transfers only when their whole shares fit).
//!
//! Here each worker, the fastest links first, gets what its processor and
//! links allow, within what the uplink has left (as in the bound), and
//! within the time of its lane that the workers already served whose
//! transfers it does not fit beside leave it: all of the time they do not
//! use, and of the time they do, what their transfers leave below
//! `TUNING.fill` at their full rates ([`crate::lane::room`]). The lane shares
//! `TUNING.cap` fairly between such transfers, slowing the one
//! served first; counting only what it leaves below `TUNING.fill`
//! keeps the workers served first at the rates they were given, and is
//! what online correction was measured with. It is the bound's own when
//! every share fits beside every other.
//!
//! Why the room counts: without it, a worker's rate fell from all of it
//! to nothing as its share and another's crossed 1 between them, and
//! measured speeds cross it by chance. On the switched test bed (`a:250:15
//! b:400:10 c:150:35 d:300:25`, n = 512, 120 products, one platform file,
//! runs in turn), a first correction read `b`'s and `d`'s sends 1.24 and
//! 1.17 times their planned time (shares 0.49 and 0.53 of the uplink),
//! the next one shared `b`'s products out to `d` (14 and 91, against 45
//! and 75 planned), and `d`, receiving while it computed on a quarter of
//! a core, fell behind: 12.2-12.4 s in three such runs, against 10.0-10.6
//! s in seven where the first reading had the shares fit (0.97-0.99).

use crate::bound::SteadyState;
use crate::platform::{Platform, Worker};
use crate::schedule::Uplink;

/// A worker's transfer of one unit one way: the lane's seconds it takes
/// (the slower of its link and the uplink) and its share of the lane.
#[derive(Debug, Clone, Copy)]
struct Way {
    secs: f64,
    share: f64,
}

fn way(w: &Worker, uplink: Uplink, send: bool) -> Way {
    let (secs, share) = uplink.unit(if send { w.c } else { w.d }, send);
    Way { secs, share }
}

/// What one lane offers worker `i` beside the workers served before it.
struct Lane {
    /// Seconds of the lane a unit of `i`'s takes (its send, return or both).
    need: f64,
    /// The share of each second no transfer `i`'s do not fit beside holds.
    free: f64,
    /// The transfers `i`'s do not fit beside (worker, send or return): the
    /// time of theirs that hosts no room transfer yet, and the rate `i`'s
    /// run at in their room.
    rooms: Vec<(usize, usize, f64, f64)>,
}

impl Lane {
    fn of(
        i: usize,
        lane: &[usize],
        served: &[usize],
        alpha: &[f64],
        ways: &[[Way; 2]],
        used: [&[[f64; 2]]; 2],
    ) -> Lane {
        let need = lane.iter().map(|&k| ways[i][k].secs).sum();
        let mut free = 1.0;
        let mut rooms = Vec::new();
        for &j in served {
            for &k in lane {
                // `i`'s sends and returns alike: the slower of them.
                let rate = (lane.iter())
                    .map(|&m| crate::lane::room(ways[i][m].share, ways[j][k].share))
                    .fold(1.0, f64::min);
                if rate < 1.0 {
                    let busy = alpha[j] * ways[j][k].secs;
                    free -= busy;
                    let lent = used[0][j][k] + used[1][j][k];
                    rooms.push((j, k, (busy - lent).max(0.0), rate));
                }
            }
        }
        rooms.sort_by(|a, b| b.3.total_cmp(&a.3));
        Lane { need, free, rooms }
    }

    /// Seconds of its lane's time `i`'s units may take a second.
    fn capacity(&self) -> f64 {
        self.free.max(0.0) + self.rooms.iter().map(|r| r.2 * r.3).sum::<f64>()
    }

    /// `i` takes `a` units a second: the free time first, then the rooms
    /// it runs fastest in, which then host it. Returns the seconds of its
    /// lane's time (at full rate) carried in rooms.
    fn host(&self, a: f64, hosted: &mut [[f64; 2]]) -> f64 {
        let mut over = a * self.need - self.free.max(0.0);
        let mut carried_all = 0.0;
        for &(j, k, time, rate) in &self.rooms {
            if over <= 0.0 || rate <= 0.0 {
                break;
            }
            let carried = over.min(time * rate);
            hosted[j][k] += carried / rate;
            over -= carried;
            carried_all += carried;
        }
        carried_all
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
    // Of each worker's sends and returns, the time that carries another's
    // transfer in its room already (one at a time), and the time they run
    // in another's room themselves (which has no room to lend).
    let mut hosted = vec![[0.0f64; 2]; wk.len()];
    let mut roomed = vec![[0.0f64; 2]; wk.len()];
    let mut served: Vec<usize> = Vec::new();
    for i in order {
        // Lanes share no transfer (full duplex) or are one: hosting in one
        // changes nothing another offers.
        let offered: Vec<Lane> = (lanes.iter())
            .map(|lane| Lane::of(i, lane, &served, &alpha, &ways, [&hosted, &roomed]))
            .collect();
        let mut a = cap[i].min(left);
        for l in offered.iter().filter(|l| l.need > 0.0) {
            a = a.min(l.capacity() / l.need);
        }
        alpha[i] = a.max(0.0);
        for (lane, l) in lanes.iter().zip(&offered).filter(|(_, l)| l.need > 0.0) {
            let carried = l.host(alpha[i], &mut hosted);
            for &k in lane.iter() {
                roomed[i][k] += carried * ways[i][k].secs / l.need;
            }
        }
        left = (left - alpha[i]).max(0.0);
        served.push(i);
    }
    SteadyState::of(alpha)
}
