//! Paced sends behind a shared uplink. A transfer whose link's full rate
//! does not fit in what the uplink has left starts only in the room left
//! below `TUNING.fill` ([`crate::lane`]), so a worker whose link
//! nearly fills the uplink leaves the rest of it idle while it is served
//! when no other worker's transfer fits beside it. (Since transfers start
//! in the room left, plain plans fill the uplink too and a paced plan is
//! seldom the earlier.) Holding another
//! worker's sends to a lower rate (the master paces its socket) makes them
//! fit in that rest, and the uplink carries what the steady state says it
//! can. A paced worker is planned as if its link were that slow: its `c`
//! becomes the pace, so the plan, the port's admission and the run's
//! corrections all see the transfers as they will be.
//!
//! Which workers, and how slow: the steady state behind the uplink
//! ([`steady_state_uplink`]) gives each worker its rate; the ones it fills
//! to their link's, processor's or return's limit (the full ones) are held
//! a little below their links' rates (`TUNING.headroom`) and to the steady
//! state's rate, and the others share what those leave of the uplink (less
//! a margin, `TUNING.margin`) so that all of them fit at once: an equal share
//! each, or their own rate when it is less. The plan made on the paced
//! platform then decides which of them to use; the planner keeps it only
//! when it predicts an earlier end than the plan at full speed.
//!
//! The other way a plain plan leaves the uplink short: links whose shares
//! land just past the admission rule ([`crate::lane::admits`]), so that
//! fewer sends run at once than the lane carries (five links of 0.42 of
//! the uplink: two hold 0.84 and a third never starts). [`fitted`] holds
//! every link above a common share to it, so that `m` sends leave room for
//! one more (`m` = 2, 3, 4: three candidates); once more of them run
//! than fit, they share `TUNING.cap` of the lane fairly, and what
//! each runs at no longer depends on its link. The planner plans every
//! candidate and judges the earliest. On the switched test bed (committed
//! platform files, runs in turn, `docs/planner.md`), twelve stars where a
//! fitted candidate was taken ran 0.74-0.98× as long as before.

use crate::bound::steady_state_uplink;
use crate::platform::{Platform, Worker};
use crate::schedule::{Ports, Uplink};
use crate::TUNING;

/// A paced worker's sends: planned at `secs` a unit (its socket held to
/// `TUNING.catch_up` times that rate), where its link alone takes `link`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    pub secs: f64,
    pub link: f64,
}

impl Pace {
    /// Bytes a second the master's socket to this worker is held to, for
    /// units of `unit_bytes`: `TUNING.catch_up` times the pace.
    pub fn socket_rate(&self, unit_bytes: u64) -> u64 {
        (TUNING.catch_up * unit_bytes as f64 / self.secs).round().max(1.0) as u64
    }
}

/// The pace of each worker's sends (`None`: not paced), when pacing lets
/// transfers fit beside each other that do not now; `None` when it would
/// change nothing. Only sends are paced, and only behind a full-duplex
/// uplink whose sends weigh at least as much as its returns (where the
/// sends are what fills it), at least `TUNING.min_gain` times as fast as the
/// fastest link.
pub fn paces(platform: &Platform, uplink: Uplink) -> Option<Vec<Option<Pace>>> {
    if !sends_fill(platform, uplink) {
        return None;
    }
    let wk = platform.workers();
    let ss = steady_state_uplink(platform, uplink);
    let per = |w: &Worker| uplink.unit(w.c, true).0;
    let limit = |w: &Worker| 1.0 / w.w.max(w.c).max(w.d);
    let full: Vec<bool> = (0..wk.len())
        .map(|i| ss.alpha[i] > 0.0 && ss.alpha[i] >= TUNING.full * limit(&wk[i]))
        .collect();
    let mut pace = vec![None; wk.len()];
    // The full ones: a little below their links, and no faster than the
    // steady state needs (a worker its processor holds back need not send
    // at its link's rate).
    for i in (0..wk.len()).filter(|&i| full[i]) {
        let secs = (per(&wk[i]) / TUNING.headroom).max(1.0 / ss.alpha[i]);
        pace[i] = Some(Pace { secs, link: wk[i].c });
    }
    let taken: f64 = pace.iter().flatten().map(|p| uplink.share_of(p.secs, true)).sum();
    let mut room = TUNING.margin * (1.0 - taken);
    if room <= 0.0 {
        return None;
    }
    // The others share the room, so that all of them fit beside the full
    // ones at once: the slowest links keep their own rates if they fit in
    // an equal share, the rest are held to what is left, equally.
    let mut others: Vec<usize> = (0..wk.len()).filter(|&i| !full[i]).collect();
    others.sort_by(|&a, &b| per(&wk[b]).total_cmp(&per(&wk[a])));
    let mut held = false;
    for (k, &i) in others.iter().enumerate() {
        let equal = room / (others.len() - k) as f64;
        let share = uplink.unit(wk[i].c, true).1;
        if share <= equal {
            room -= share;
        } else {
            pace[i] = Some(Pace {
                secs: uplink.secs_at(equal, true),
                link: wk[i].c,
            });
            room -= equal;
            held = true;
        }
    }
    // Holding only the full ones back would cost time and fit no one in.
    held.then_some(pace)
}

/// Sends held to a common share so that `m` of them leave room for one
/// more under the lane's admission rule ([`crate::lane::admits`]), for
/// `m` from 2 to `TUNING.fit_max`: one candidate each (only the workers whose
/// links' shares are above it are held). Without them, links whose shares
/// land just past the rule run fewer sends at once than the lane carries:
/// five links of 0.42 of the uplink each, two sends hold 0.84, more than
/// the rule's `TUNING.fill - TUNING.room`, and a third never starts beside them. Held
/// below 0.40, three (or more) run at once and share `TUNING.cap`
/// of it. The links below the share keep their rates but are paced at
/// them all the same: a paced worker's chunks go out in pieces, and with
/// sends to it under way most of the run a return granted behind a whole
/// chunk waits for it (a 40 Mbit/s link's returns took 1.85× their time).
/// The same preconditions as [`paces`]; the planner keeps one only when
/// it predicts an earlier end by the gain asked of any pace.
pub fn fitted(platform: &Platform, uplink: Uplink) -> Vec<Vec<Option<Pace>>> {
    if !sends_fill(platform, uplink) {
        return Vec::new();
    }
    let wk = platform.workers();
    // Each send's share of the lane, as the lane's admission sees it.
    let shares: Vec<f64> = (wk.iter())
        .map(|w| Ports::Shared(uplink).transfer(w, true, 1.0).share)
        .collect();
    let fits = TUNING.fill - TUNING.room;
    (2..=TUNING.fit_max)
        .map(|m| TUNING.fit_below * fits / m as f64)
        .filter(|&t| shares.iter().filter(|&&s| s > t).count() >= 2)
        .map(|t| {
            (wk.iter().zip(&shares))
                .map(|(w, &s)| {
                    Some(Pace {
                        secs: if s > t { uplink.secs_at(t, true) } else { w.c },
                        link: w.c,
                    })
                })
                .collect()
        })
        .collect()
}

/// Whether sends are what fills `uplink` and pacing them may help: a
/// full-duplex uplink whose sends weigh at least as much as its returns,
/// at least `TUNING.min_gain` times as fast as the fastest link alone.
fn sends_fill(platform: &Platform, uplink: Uplink) -> bool {
    let fastest = (platform.workers().iter())
        .map(|w| w.alone()[0])
        .fold(f64::INFINITY, f64::min);
    uplink.duplex && uplink.send >= uplink.ret && fastest >= TUNING.min_gain * uplink.send
}

/// `platform` with each paced worker's `c` its pace (never faster than its
/// link): what a plan with these paces is made on (outside the planner,
/// [`crate::Plan::costs_on`]).
pub fn paced(platform: &Platform, pace: &[Option<Pace>]) -> Platform {
    with_c(platform, |i, c| {
        pace.get(i).copied().flatten().map_or(c, |p| c.max(p.secs))
    })
}

fn with_c(platform: &Platform, c: impl Fn(usize, f64) -> f64) -> Platform {
    let workers = (platform.workers().iter().enumerate())
        .map(|(i, w)| Worker {
            c: c(i, w.c),
            ..w.clone()
        })
        .collect();
    // Paces and links were valid costs.
    Platform::new(workers)
        .map(|p| p.with_uplink(platform.uplink()))
        .unwrap_or_else(|_| platform.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uplink(send: f64, ret: f64) -> Uplink {
        Uplink::new(send, ret, true).expect("valid")
    }

    #[test]
    fn the_worker_the_uplink_runs_out_on_is_paced_into_its_rest() {
        // a's link is 75% of the uplink (1/0.0533 units/s out of 1/0.04 =
        // 25): alone it leaves a quarter idle, and b (full share 0.04/0.06
        // = 0.67) never fits beside it.
        let a_c = 0.04 / 0.75;
        let p = Platform::new(vec![
            Worker::new("a", a_c, 0.01, 0.01),
            Worker::new("b", 0.06, 0.01, 0.01),
        ])
        .expect("valid");
        let u = uplink(0.04, 0.02);
        let pace = paces(&p, u).expect("b is paced");
        // a, full, is held a little below its link; b to the margin of the rest.
        let a = pace[0].expect("a held back");
        assert!(
            (a.secs - a_c / TUNING.headroom).abs() < 1e-12 && a.link == a_c,
            "{pace:?}"
        );
        let room = TUNING.margin * (1.0 - TUNING.headroom * 0.75);
        let b = pace[1].expect("paced");
        assert!((b.secs - 0.04 / room).abs() < 1e-12 && b.link == 0.06, "{pace:?}");
        // Now both fit on the port at once, and together take no more than
        // the headroom and the margin leave.
        let q = paced(&p, &pace);
        let ports = Ports::Shared(u);
        let shares: f64 = q.workers().iter().map(|w| ports.transfer(w, true, 1.0).share).sum();
        assert!(
            (shares - (TUNING.headroom * 0.75 + room)).abs() < 1e-12 && shares < 1.0,
            "{shares}"
        );
        assert!(q.workers()[1].c > p.workers()[1].c);
        let rest = |w: &Worker| (w.w, w.d, w.latency, w.under_load);
        assert!(q.workers().iter().zip(p.workers()).all(|(a, b)| rest(a) == rest(b)));
    }

    #[test]
    fn an_uplink_no_faster_than_the_fastest_link_is_not_paced_into() {
        let u = uplink(0.04, 0.02);
        let two = |a: Worker| Platform::new(vec![a, Worker::new("b", 0.06, 0.01, 0.01)]).expect("valid");
        // a's link alone is as fast as the uplink; under load (receiving,
        // computing and returning at once) its node takes 1.3× as long,
        // which leaves room on paper only.
        let loaded = Worker {
            under_load: Some([1.3, 1.5, 1.3]),
            ..Worker::new("a", 0.04 * 1.3, 0.01, 0.01)
        };
        assert_eq!(paces(&two(loaded), u), None);
        // Nor a link 90% of the uplink: 1.11× is below TUNING.min_gain.
        assert_eq!(paces(&two(Worker::new("a", 0.04 / 0.9, 0.01, 0.01)), u), None);
        // The same costs from a link itself that slow: the room is there.
        let slow = Worker::new("a", 0.04 * 1.3, 0.01, 0.01);
        assert!(paces(&two(slow), u).is_some());
    }

    #[test]
    fn a_paced_socket_can_make_up_for_lost_time() {
        // 1.5 MiB a unit at 0.12 s a unit: 13.1 MB/s planned.
        let p = Pace { secs: 0.12, link: 0.05 };
        let unit = 3 << 19;
        let rate = p.socket_rate(unit) as f64;
        assert!((rate - TUNING.catch_up * unit as f64 / 0.12).abs() <= 0.5, "{rate}");
        // A chunk of ten units whose sending starts a round trip of 0.2 s
        // late still ends when the plan says, as long as the loss is within
        // what the faster socket makes up: 10·0.12·(1 − 1/TUNING.catch_up).
        let late = 0.2;
        assert!(late + 10.0 * unit as f64 / rate <= 10.0 * 0.12);
        // Never a rate of zero, which would stop the socket.
        assert_eq!(Pace { secs: 1e9, link: 1.0 }.socket_rate(1), 1);
    }

    #[test]
    fn fitted_shares_make_room_for_one_more_send() {
        // Five links of 0.42 of the uplink: two sends hold 0.84, past the
        // admission rule, and a third never starts beside them.
        let u = uplink(0.0178, 0.0088);
        let even: Vec<Worker> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|&n| Worker::new(n, 0.0178 / 0.42, 0.003, 0.021))
            .collect();
        let p = Platform::new(even).expect("valid");
        assert!(!crate::lane::admits(0.84, 0.42));
        let fits = TUNING.fill - TUNING.room;
        let all = fitted(&p, u);
        assert_eq!(all.len(), TUNING.fit_max - 1);
        for (m, pace) in (2..=TUNING.fit_max).zip(&all) {
            let first = pace[0].expect("held");
            let share = 0.0178 / first.secs;
            // m sends leave room for one more, and only just.
            assert!(
                share <= fits / m as f64 && share > 0.98 * fits / m as f64,
                "{m}: {share}"
            );
            assert!(crate::lane::admits(m as f64 * share, share), "{m}: {share}");
            assert!(pace.iter().all(|x| *x == Some(first)));
        }
        // A link already below a candidate's share keeps its rate (paced at
        // it: its chunks then go out in pieces, so that its returns do not
        // wait behind them); one held link alone is no candidate (nothing
        // fits beside it that did not).
        let mixed = Platform::new(vec![
            Worker::new("a", 0.0178 / 0.42, 0.003, 0.021),
            Worker::new("b", 0.0178 / 0.42, 0.003, 0.021),
            Worker::new("c", 0.0178 / 0.30, 0.003, 0.021),
        ])
        .expect("valid");
        let cands = fitted(&mixed, u);
        let held = |c: &Vec<Option<Pace>>| c.iter().flatten().filter(|x| x.secs > x.link).count();
        assert_eq!(cands.iter().map(held).collect::<Vec<_>>(), vec![2, 3, 3]);
        let own = 0.0178 / 0.30;
        assert_eq!(cands[0][2], Some(Pace { secs: own, link: own }));
        assert!(cands.iter().all(|c| c.iter().all(Option::is_some)));
        // Half duplex, or returns weighing more: no candidates.
        assert!(fitted(&p, Uplink::new(0.0178, 0.0088, false).expect("valid")).is_empty());
        assert!(fitted(&p, uplink(0.0178, 0.02)).is_empty());
    }

    #[test]
    fn nothing_is_paced_where_it_would_change_nothing() {
        let u = uplink(0.04, 0.02);
        // Two links of half the uplink each: both fit at full speed (both are
        // full in the steady state).
        let halves = Platform::new(vec![
            Worker::new("a", 0.08, 0.01, 0.01),
            Worker::new("b", 0.08, 0.01, 0.01),
        ])
        .expect("valid");
        assert_eq!(paces(&halves, u), None);
        // One worker: no one to fit beside it.
        let one = Platform::new(vec![Worker::new("a", 0.045, 0.01, 0.01)]).expect("valid");
        assert_eq!(paces(&one, u), None);
        // Returns weigh more than sends: pacing sends would not fill the uplink.
        let p = Platform::new(vec![
            Worker::new("a", 0.045, 0.01, 0.01),
            Worker::new("b", 0.06, 0.01, 0.01),
        ])
        .expect("valid");
        assert_eq!(paces(&p, uplink(0.04, 0.05)), None);
        // Half duplex: not paced.
        assert_eq!(paces(&p, Uplink::new(0.04, 0.02, false).expect("valid")), None);
    }
}
