//! How transfers share a lane of a shared uplink ([`crate::Ports::Shared`]):
//! when one may start, and how fast those under way then run.
//!
//! A transfer's *share* is what it takes of the lane at its link's full
//! rate (the uplink's cost a unit over its own). Whenever the shares of the
//! transfers under way fit (add up to 1 or less), each runs at its link's
//! rate. When they do not, they share `TUNING.cap` of the lane as TCP's flows
//! share a bottleneck: each gets the same part of it, or its whole share
//! if that is less, and what the smaller ones leave goes to the others
//! (max-min fairness, [`rates`]). So a transfer started beside others
//! slows them down, and speeds up as they end; [`Fluid`] follows a lane's
//! transfers through those changes.
//!
//! A transfer whose whole share does not fit beside those under way
//! starts only while they hold less than `TUNING.fill` of the lane, `TUNING.room` at
//! least left below it ([`admits`]): the lane is not left idle while a
//! transfer that could use it waits, and a transfer is not started beside
//! others that already fill the lane, where it would slow them all for
//! little.
//!
//! Why fair sharing: on the switched test bed (eleven stars, two runs
//! each of their committed platform files), every send that crossed beside
//! another was timed again by each rule from the measured starts of those
//! beside it: with `TUNING.cap` = 0.95 the predicted times added up to
//! 0.94-1.11× (median 1.00) of the measured ones, star by star; the rule
//! this one replaces (the first started kept its rate, the next got what
//! it left below 0.85) predicted 1.00-1.84× (a transfer started beside a
//! faster link's ran 2-3× faster than it said). `scripts/lane-fit.py`
//! repeats the comparison on any run's trace (`docs/planner.md`).
//!
//! The runtime's port ([`admits`]) and the planner's timeline (the shared
//! lane of [`crate::sequence`], with [`Fluid`]) follow these rules alike,
//! and so does the simulator.

use crate::tol::SHARE_EPS;
use crate::TUNING;

/// Whether a transfer of `share` may start on a lane whose transfers
/// under way hold `used` (their whole shares added up): all of it fits, or
/// `TUNING.room` of the lane at least is free below `TUNING.fill`.
pub fn admits(used: f64, share: f64) -> bool {
    used + share <= 1.0 + SHARE_EPS || used + share.min(TUNING.room) <= TUNING.fill + SHARE_EPS
}

/// The rate, as a share of its full rate, that a transfer of `share` may
/// count on beside one of `other` that keeps its own (the steady state
/// the port admits, [`crate::admitted`], serves workers in turn this
/// way): all of it if both fit, else, if [`admits`] lets it start, what
/// `other` leaves below `TUNING.fill`, or nothing.
pub fn room(share: f64, other: f64) -> f64 {
    if share + other <= 1.0 + SHARE_EPS {
        1.0
    } else if admits(other, share) {
        (TUNING.fill - other).clamp(0.0, share) / share
    } else {
        0.0
    }
}

/// The rate of each transfer of `shares` under way at once, as a share of
/// its full rate: all of it when the shares fit, else max-min fair shares
/// of `TUNING.cap` (see the module).
pub fn rates(shares: &[f64]) -> Vec<f64> {
    let mut out = Vec::new();
    rates_into(shares, &mut Vec::new(), &mut out);
    out
}

/// [`rates`] into `out`, with `order` to sort in: no allocation once the
/// buffers are as long as `shares` (a lane's rates change at every start
/// and end of a transfer).
fn rates_into(shares: &[f64], order: &mut Vec<usize>, out: &mut Vec<f64>) {
    out.clear();
    if shares.iter().sum::<f64>() <= 1.0 + SHARE_EPS {
        out.resize(shares.len(), 1.0);
        return;
    }
    // Water-filling: the smallest shares are served whole while they are
    // below an equal part of what is left.
    order.clear();
    order.extend(0..shares.len());
    order.sort_by(|&a, &b| shares[a].total_cmp(&shares[b]));
    out.resize(shares.len(), 0.0);
    let mut left = TUNING.cap;
    for (k, &i) in order.iter().enumerate() {
        let part = left / (shares.len() - k) as f64;
        out[i] = shares[i].min(part);
        left -= out[i];
    }
    for (g, &s) in out.iter_mut().zip(shares) {
        *g = if s > 0.0 { *g / s } else { 1.0 };
    }
}

/// The transfers under way on one lane, each known by a key of the
/// caller's, with the work it has left (seconds at its link's full rate),
/// its whole share and its speed, progressing at the rates [`rates`]
/// gives. A transfer's *speed* is the part of its link's rate its worker
/// keeps up with (1 unless the caller slows it: a worker short of
/// processor returns more slowly while it also receives): it then takes
/// only that part of its share, and leaves the rest to the others. Time
/// only moves forward: starts, ends and changes of speed at instants no
/// earlier than the last.
#[derive(Debug, Clone)]
pub struct Fluid<K: Copy> {
    at: f64,
    flows: Vec<Flow<K>>,
    /// The transfer that ends first at the present rates, and the shares
    /// under way added up: worked out whenever the transfers or their
    /// rates change (both are asked several times an instant).
    next: Option<(f64, K)>,
    used: f64,
    /// Scratch for [`Fluid::rerate`].
    asked: Vec<f64>,
    order: Vec<usize>,
    rated: Vec<f64>,
}

#[derive(Debug, Clone)]
struct Flow<K: Copy> {
    key: K,
    /// Seconds of work left at the link's full rate.
    left: f64,
    share: f64,
    speed: f64,
    /// Seconds of work done a second, at the present rates.
    pace: f64,
    /// When it ends at the present rates.
    end: f64,
}

impl<K: Copy + PartialEq> Default for Fluid<K> {
    fn default() -> Self {
        Fluid {
            at: 0.0,
            flows: Vec::new(),
            next: None,
            used: 0.0,
            asked: Vec::new(),
            order: Vec::new(),
            rated: Vec::new(),
        }
    }
}

impl<K: Copy + PartialEq> Fluid<K> {
    /// The whole shares of the transfers under way, added up.
    pub fn used(&self) -> f64 {
        self.used
    }

    /// Whether no transfer is under way.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// A transfer of `secs` at its full rate and `share` starts at `t`, at
    /// full speed.
    pub fn start(&mut self, t: f64, key: K, secs: f64, share: f64) {
        self.start_at(t, key, secs, share, 1.0);
    }

    /// As [`Fluid::start`], at `speed` (in (0, 1]) of its link's rate.
    pub fn start_at(&mut self, t: f64, key: K, secs: f64, share: f64, speed: f64) {
        self.advance(t);
        self.flows.push(Flow {
            key,
            left: secs.max(0.0),
            share,
            speed: speed.clamp(f64::MIN_POSITIVE, 1.0),
            pace: 0.0,
            end: f64::INFINITY,
        });
        self.rerate();
    }

    /// From `t`, the transfer `key` (if under way) runs at `speed` of its
    /// link's rate; the others' rates follow.
    pub fn set_speed(&mut self, t: f64, key: K, speed: f64) {
        let speed = speed.clamp(f64::MIN_POSITIVE, 1.0);
        if self.flows.iter().any(|f| f.key == key && f.speed != speed) {
            self.advance(t);
            for f in self.flows.iter_mut().filter(|f| f.key == key) {
                f.speed = speed;
            }
            self.rerate();
        }
    }

    /// The transfer that ends first at the present rates, and when.
    pub fn next_end(&self) -> Option<(f64, K)> {
        self.next
    }

    /// When the transfer `key`, if under way, ends at the present rates.
    pub fn end_of(&self, key: K) -> Option<f64> {
        self.flows.iter().find(|f| f.key == key).map(|f| f.end)
    }

    /// The transfer `key` ends at `t` (its [`Fluid::next_end`]): the others
    /// have progressed until then, and run faster from then on.
    pub fn finish(&mut self, t: f64, key: K) {
        self.advance(t);
        self.flows.retain(|f| f.key != key);
        self.rerate();
    }

    /// Every transfer progresses until `t` at its present rate.
    fn advance(&mut self, t: f64) {
        let dt = (t - self.at).max(0.0);
        for f in &mut self.flows {
            f.left = (f.left - f.pace * dt).max(0.0);
        }
        self.at = self.at.max(t);
    }

    /// Each transfer takes what [`rates`] gives the part of its share its
    /// speed asks for; its work goes at that over its whole share.
    fn rerate(&mut self) {
        self.asked.clear();
        self.asked.extend(self.flows.iter().map(|f| f.share * f.speed));
        rates_into(&self.asked, &mut self.order, &mut self.rated);
        let mut next: Option<(f64, K)> = None;
        for (f, &r) in self.flows.iter_mut().zip(&self.rated) {
            f.pace = r * f.speed;
            f.end = self.at + if f.pace > 0.0 { f.left / f.pace } else { f64::INFINITY };
            // The first of the earliest.
            if next.is_none_or(|n| f.end.total_cmp(&n.0).is_lt()) {
                next = Some((f.end, f.key));
            }
        }
        self.next = next;
        self.used = self.flows.iter().map(|f| f.share).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn shares_that_fit_run_at_their_links_rates() {
        assert_eq!(rates(&[0.5, 0.3, 0.2]), vec![1.0; 3]);
        assert!(admits(0.5, 0.5) && admits(0.0, 1.0));
        let mut f = Fluid::default();
        f.start(2.0, 'a', 3.0, 0.5);
        f.start(3.0, 'b', 1.0, 0.5);
        assert_eq!(f.next_end(), Some((4.0, 'b')));
        f.finish(4.0, 'b');
        assert_eq!(f.next_end(), Some((5.0, 'a')));
    }

    #[test]
    fn shares_that_do_not_fit_share_the_cap_fairly() {
        // Two of 0.8 and 0.6: 0.475 each of the 0.95 carried.
        let r = rates(&[0.8, 0.6]);
        assert!(close(r[0], 0.475 / 0.8) && close(r[1], 0.475 / 0.6), "{r:?}");
        // A small share is served whole, the others split what it leaves:
        // 0.1 whole, then (0.95 - 0.1) / 2 = 0.425 each.
        let r = rates(&[0.9, 0.1, 0.7]);
        assert!(
            close(r[1], 1.0) && close(r[0], 0.425 / 0.9) && close(r[2], 0.425 / 0.7),
            "{r:?}"
        );
        // Every rate times its share adds up to the cap.
        let s = [0.3, 0.45, 0.5, 0.2];
        let r = rates(&s);
        assert!(close(s.iter().zip(&r).map(|(a, b)| a * b).sum::<f64>(), TUNING.cap));
    }

    #[test]
    fn a_transfer_started_beside_another_slows_it_until_it_ends() {
        // 'a' (share 0.8, 2 s of work) alone from 0 to 1: 1 s left. 'b'
        // (share 0.6, 0.3 s) starts at 1: both at 0.475 of the lane, 'b' at
        // 0.475 / 0.6 of its rate ends at 1 + 0.3 * 0.6 / 0.475; 'a' did
        // (0.3 * 0.6 / 0.475) * 0.475 / 0.8 of its work meanwhile and runs
        // the rest at its full rate.
        let mut f = Fluid::default();
        f.start(0.0, 'a', 2.0, 0.8);
        f.start(1.0, 'b', 0.3, 0.6);
        let (end_b, k) = f.next_end().expect("two under way");
        let span = 0.3 * 0.6 / 0.475;
        assert!(k == 'b' && close(end_b, 1.0 + span));
        f.finish(end_b, 'b');
        let done_a = span * 0.475 / 0.8;
        let (end_a, k) = f.next_end().expect("one under way");
        assert!(k == 'a' && close(end_a, end_b + 1.0 - done_a), "{end_a}");
        f.finish(end_a, 'a');
        assert!(f.is_empty() && f.next_end().is_none());
    }

    #[test]
    fn a_slowed_transfer_takes_only_its_speeds_part_and_leaves_the_rest() {
        // 'a' (share 0.8, 2 s of work) at half speed asks 0.4 of the lane,
        // 'b' (share 0.8, 1.1 s) all of its 0.8: 1.2 do not fit. Of the
        // 0.95 carried, 'a' gets its 0.4 whole (below 0.475, half of it),
        // 'b' the 0.55 left: 'b' ends at 1.1 / (0.55 / 0.8) = 1.6, when 'a'
        // has done 0.8 s of its work at 0.5 a second.
        let mut f = Fluid::default();
        f.start_at(0.0, 'a', 2.0, 0.8, 0.5);
        f.start(0.0, 'b', 1.1, 0.8);
        let (end_b, k) = f.next_end().expect("two under way");
        assert!(k == 'b' && close(end_b, 1.6), "{end_b}");
        f.finish(end_b, 'b');
        // Alone, still at half speed: 1.2 s of work left takes 2.4 s.
        assert!(close(f.end_of('a').expect("under way"), 4.0));
        // Back to full speed at 2.0: 1.0 s left at 2.0, done at 3.0.
        f.set_speed(2.0, 'a', 1.0);
        assert!(close(f.end_of('a').expect("under way"), 3.0));
        // A key not under way changes nothing.
        f.set_speed(2.5, 'z', 0.1);
        assert!(close(f.end_of('a').expect("under way"), 3.0));
        f.finish(3.0, 'a');
        assert!(f.is_empty());
    }

    #[test]
    fn full_speed_is_what_it_was_without_speeds() {
        // The same three transfers through `start` and through `start_at`
        // at speed 1 end at the same instants, in the same order.
        let (mut a, mut b) = (Fluid::default(), Fluid::default());
        for (t, k, secs, share) in [(0.0, 1, 2.0, 0.7), (0.3, 2, 0.5, 0.6), (0.4, 3, 1.0, 0.2)] {
            a.start(t, k, secs, share);
            b.start_at(t, k, secs, share, 1.0);
        }
        while let Some((t, k)) = a.next_end() {
            assert_eq!(b.next_end(), Some((t, k)));
            a.finish(t, k);
            b.finish(t, k);
        }
        assert!(b.is_empty());
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
