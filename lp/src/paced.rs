//! Paced plans behind a shared uplink: the plain plan beside the same
//! plan on the platform with paced sends ([`crate::pace`]), and the verdict
//! on which to run.

use crate::error::Result;
use crate::plan::{plan, Plan, Request, Strategy};
use crate::platform::Platform;
use crate::schedule::Ports;

/// A plan shorter by less than this share is not worth pacing for. Both
/// the paced plan and the plain one may have given up to
/// [`crate::rounds::slack`] of their predictions for fewer chunks; the
/// paced one must win by both: it leans on the model harder (sends held
/// to fit beside each other, every worker enrolled, each node receiving
/// while it computes), and where that model is off the paced plan loses
/// more than it promised. On the switched test bed, costs measured by
/// `dls calibrate`, runs in turn: star `a:250:15 b:400:10 c:150:35
/// d:300:25` (n = 512, 120 products), paced predicted 5.3% earlier than
/// plain and ran 12.8-13.4 s (1.21-1.27× predicted) against 11.1-11.7 s
/// (0.99-1.05×); a four-worker plan predicted 1.6% earlier ran 5% later.
/// Where a paced plan won, it won by little: the five-worker star (n =
/// 320), paced predicted 4.2% earlier, ran 8.2 s against 8.3-8.7 s, both
/// within 10% of their predictions. So a paced plan must win by more than
/// those that lost (with the slack, 8% against 5.3% and less). Those
/// measurements were made when a transfer started beside another got only
/// what that one left; since transfers share a lane fairly
/// ([`crate::lane`]) a paced plan predicts at most about 5% earlier than
/// the plain one on random stars (3,000 of two to five workers), but
/// more where equal links land just past the lane's admission rule: six
/// workers of 200 Mbit/s behind 500 (`homog-320`, n = 320, 250
/// products), links of 0.41 of the uplink, two sends under way hold 0.81
/// and a third never starts beside them, a fifth of the uplink idle; the
/// paced plan predicted 8.7% earlier (8.15 s against 8.92 s) and ran
/// 7.95-8.04 s (0.98x its prediction) against 8.81-9.24 s for the plain
/// one (one calibration, runs in turn), where 9% was asked.
pub const PACE_GAIN: f64 = 0.05;

/// What a paced plan must win by, instead of [`PACE_GAIN`], on costs that
/// were not measured under load (no worker's `under_load`: a run's own
/// probes, one transfer at a time, or costs written by hand). A pace holds
/// each worker's sends to fit beside the others', which only holds if
/// every node keeps up while it receives, computes and returns at once;
/// the fastest link's node under a small processor share did not. On the
/// switched test bed (five workers `a:200:25 b:100:50 c:300:15 d:150:30
/// e:400:20`, n = 320, 250 products, cold runs), the paced plans on a
/// run's own costs predicted 4.1-8.5% earlier than the plain ones and took
/// 9.8-10.5 s (makespans, 1.22-1.37× predicted, four runs), where the
/// plain plans took 7.8-9.2 s (0.93-1.11×, nine runs). The gains pacing was
/// kept for are larger (on the sixty star, paced 9.9 s predicted against
/// 14.6 s plain, and ran 10.7-10.9 s against 13.7-14.7 s).
pub const UNMEASURED_PACE_GAIN: f64 = 0.15;

/// The gain a paced plan must show on `platform` (see
/// [`UNMEASURED_PACE_GAIN`]).
pub fn pace_gain(platform: &Platform) -> f64 {
    if platform.workers().iter().any(|w| w.under_load.is_some()) {
        PACE_GAIN
    } else {
        UNMEASURED_PACE_GAIN
    }
}

/// Whether a paced plan is taken over the plain one ([`plan_paced`]),
/// ordered from the verdict wanted most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PaceVerdict {
    /// It wins by the gain asked ([`pace_gain`], or [`PACE_GAIN`] for
    /// fitted paces) or more: paced.
    Paced,
    /// It wins by [`PACE_GAIN`], not by what costs not measured under load
    /// must show: plain, with a note saying so.
    Unmeasured,
    /// Plain.
    Plain,
}

/// The verdict on a paced plan predicting `paced` seconds against `plain`
/// for the plain one, on `platform` under `ports`: it must win by the
/// gain asked ([`pace_gain`]) and the planner's slack
/// ([`crate::rounds::slack`]), which either plan may have given up.
/// `fitted`: the paces are [`crate::pace::fitted`]'s, which must win by
/// [`PACE_GAIN`] whatever the costs: they hold sends to shares that
/// transfers beyond the lane's room then share fairly, which does not
/// lean on a node keeping up under load the way fitting links into the
/// room beside the fullest does. Cold runs (costs from the run's own
/// probes) of five stars, in turn with the build that asked fitted paces
/// 15% there: 0.89-0.98× as long (medians), 0.96-1.09× their predictions
/// when paced (`docs/planner.md`).
pub fn pace_verdict(platform: &Platform, ports: Ports, plain: f64, paced: f64, fitted: bool) -> PaceVerdict {
    let share = |gain: f64| (1.0 - gain - crate::rounds::slack(ports)) * plain;
    let asked = if fitted { PACE_GAIN } else { pace_gain(platform) };
    if paced < share(asked) {
        PaceVerdict::Paced
    } else if paced < share(PACE_GAIN) {
        PaceVerdict::Unmeasured
    } else {
        PaceVerdict::Plain
    }
}

/// [`plan`], and behind a shared full-duplex uplink, for `best` and
/// `rounds`, the same on the platform with paced sends ([`crate::pace`]:
/// [`crate::pace::paces`] and each of [`crate::pace::fitted`]): the
/// earliest of them whose verdict ([`pace_verdict`]) is to pace.
/// Returns the platform the plan was made on, which is the one to run it
/// on (a paced worker's `c` is its pace).
pub fn plan_paced(platform: &Platform, req: &Request) -> Result<(Platform, Plan)> {
    let (Ports::Shared(u), Strategy::Best | Strategy::Rounds) = (req.ports, req.strategy) else {
        return Ok((platform.clone(), plan(platform, req)?));
    };
    let margin = crate::pace::paces(platform, u).map(|p| (p, false));
    let fitted = crate::pace::fitted(platform, u).into_iter().map(|p| (p, true));
    let candidates: Vec<_> = margin.into_iter().chain(fitted).collect();
    // The candidates are planned beside the plain plan, each on a thread
    // of its own: planning is on the path to a run's first send.
    let (plain, planned) = std::thread::scope(|s| {
        let each: Vec<_> = (candidates.into_iter())
            .map(|(pace, fitted)| {
                s.spawn(move || {
                    let slow = crate::pace::paced(platform, &pace);
                    plan(&slow, req).ok().map(|p| (pace, fitted, slow, p))
                })
            })
            .collect();
        let plain = plan(platform, req);
        let planned: Vec<_> = (each.into_iter())
            .filter_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect();
        (plain, planned)
    });
    let mut plain = plain?;
    let verdict = |p: &Plan, fitted: bool| pace_verdict(platform, req.ports, plain.makespan(), p.makespan(), fitted);
    // The earliest paced plan whose verdict is to pace; failing that, the
    // earliest short only of the gain asked of unmeasured costs (a note).
    let taken = (planned.into_iter())
        .map(|(pace, fitted, slow, p)| (verdict(&p, fitted), pace, slow, p))
        .min_by(|a, b| (a.0.cmp(&b.0)).then(a.3.makespan().total_cmp(&b.3.makespan())));
    match taken {
        Some((PaceVerdict::Paced, pace, slow, mut p)) => {
            let names: Vec<&str> = (pace.iter().zip(platform.workers()))
                .filter_map(|(x, w)| x.filter(|x| x.secs > x.link).map(|_| w.name.as_str()))
                .collect();
            p.notes.push(format!(
                "paced: sends to {} held below their links' rates so that more of them fit on the uplink at once ({:.6} s against {:.6} s unpaced)",
                names.join(", "),
                p.makespan(),
                plain.makespan()
            ));
            p.pace = pace;
            Ok((slow, p))
        }
        Some((PaceVerdict::Unmeasured, _, _, p)) => {
            plain.notes.push(format!(
                "not paced: paced sends predict {:.6} s, short of the {:.0}% gain asked of costs not measured under load (dls calibrate measures them)",
                p.makespan(),
                100.0 * UNMEASURED_PACE_GAIN
            ));
            Ok((platform.clone(), plain))
        }
        _ => Ok((platform.clone(), plain)),
    }
}
