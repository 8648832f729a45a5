//! The one choice between candidate plans. Every candidate (the best
//! single round, the multi-round plan, plans with paced sends behind an
//! uplink) is timed by the one execution rule ([`crate::sequence`]); the
//! choice weighs each by one objective: its predicted end against the
//! share of the others' ends it must come under ([`Candidate::keep`]), 1
//! for plans that lean on nothing calibration did not measure, less for
//! those that lean on more (paced sends hold every node to receiving,
//! computing and returning at once at the pace the plan says). The
//! earliest so weighed wins; a tie keeps the candidate listed first.
//!
//! The margins, and what each was measured on, are the planner's tuned
//! numbers (`TUNING.pace_gain`, `TUNING.unmeasured_pace_gain`, the
//! rounds' slack; `docs/tuning.md`). A margin is a number, not a rule:
//! one learned from runs' measured against predicted ends could take its
//! place.

use crate::platform::Platform;
use crate::schedule::Ports;
use crate::TUNING;

/// What kind of plan a candidate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One round, or several: plans on the platform as calibrated.
    Plain,
    /// Sends paced so that every link fits into the room beside the
    /// fullest ([`crate::pace::paces`]).
    Paced,
    /// Sends held to a common share so that more of them run at once
    /// ([`crate::pace::fitted`]).
    Fitted,
}

/// A candidate as the choice sees it: its kind and predicted end, and the
/// share of another's end it must come under to be preferred to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub kind: Kind,
    pub makespan: f64,
    pub keep: f64,
}

impl Candidate {
    /// A candidate of `kind` ending at `makespan`, planned on `platform`
    /// under `ports`: a plain plan keeps 1; a paced one must win by
    /// `TUNING.pace_gain` and the rounds' slack (either plan may have
    /// given that up for fewer chunks), by `TUNING.unmeasured_pace_gain`
    /// instead where no cost was measured under load, except fitted
    /// paces, which do not lean on a node keeping up under load the way
    /// fitting links into the room beside the fullest does.
    pub fn new(kind: Kind, makespan: f64, platform: &Platform, ports: Ports) -> Candidate {
        let keep = match kind {
            Kind::Plain => 1.0,
            Kind::Fitted => 1.0 - TUNING.pace_gain - crate::rounds::slack(ports),
            Kind::Paced => 1.0 - pace_gain(platform) - crate::rounds::slack(ports),
        };
        Candidate { kind, makespan, keep }
    }

    /// Whether this candidate is preferred to `other`: its end, weighed
    /// by what the other must keep, before the other's weighed by its own.
    pub fn beats(&self, other: &Candidate) -> bool {
        self.makespan * other.keep < other.makespan * self.keep
    }
}

/// The gain a paced plan must show on `platform`: `TUNING.pace_gain`
/// where some cost was measured under load, `TUNING.unmeasured_pace_gain`
/// otherwise.
pub fn pace_gain(platform: &Platform) -> f64 {
    if platform.workers().iter().any(|w| w.under_load.is_some()) {
        TUNING.pace_gain
    } else {
        TUNING.unmeasured_pace_gain
    }
}

/// The index of the chosen candidate: the one no other beats, the first
/// listed among equals. `None` for no candidate.
pub fn choose(candidates: &[Candidate]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, c) in candidates.iter().enumerate() {
        if best.is_none_or(|b| c.beats(&candidates[b])) {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::Worker;
    use crate::schedule::Uplink;

    fn platform(measured: bool) -> Platform {
        let w = Worker {
            under_load: measured.then_some([1.0; 3]),
            ..Worker::new("a", 0.1, 0.2, 0.05)
        };
        Platform::new(vec![w]).expect("valid")
    }

    fn shared() -> Ports {
        Ports::Shared(Uplink::new(0.05, 0.02, true).expect("valid"))
    }

    #[test]
    fn the_earliest_plain_plan_wins_and_a_tie_keeps_the_first() {
        let p = platform(true);
        let c = |m: f64| Candidate::new(Kind::Plain, m, &p, shared());
        assert_eq!(choose(&[c(10.0), c(9.0), c(9.5)]), Some(1));
        assert_eq!(choose(&[c(10.0), c(10.0)]), Some(0));
        assert_eq!(choose(&[]), None);
    }

    #[test]
    fn a_paced_plan_must_come_under_the_share_its_margin_leaves() {
        // Behind an uplink the slack is 3%: a paced plan must end under
        // 10 · (1 − 0.05 − 0.03) = 9.2 s against a plain 10 s where costs
        // were measured under load, under 10 · (1 − 0.15 − 0.03) = 8.2 s
        // where they were not; fitted paces under 9.2 s on either.
        for (measured, paced_under) in [(true, 9.2), (false, 8.2)] {
            let p = platform(measured);
            let plain = Candidate::new(Kind::Plain, 10.0, &p, shared());
            for (kind, under) in [(Kind::Paced, paced_under), (Kind::Fitted, 9.2)] {
                let at = |m: f64| Candidate::new(kind, m, &p, shared());
                assert_eq!(
                    choose(&[plain, at(under - 0.01)]),
                    Some(1),
                    "{kind:?} measured {measured}"
                );
                assert_eq!(
                    choose(&[plain, at(under + 0.01)]),
                    Some(0),
                    "{kind:?} measured {measured}"
                );
            }
        }
    }

    #[test]
    fn between_paced_plans_the_margins_weigh_too() {
        // Unmeasured costs: a room-fitting pace at 8.0 s weighs 8.0 / 0.82
        // = 9.76, a fitted one at 8.9 s weighs 8.9 / 0.92 = 9.67: fitted.
        let p = platform(false);
        let plain = Candidate::new(Kind::Plain, 10.0, &p, shared());
        let paced = Candidate::new(Kind::Paced, 8.0, &p, shared());
        let fitted = Candidate::new(Kind::Fitted, 8.9, &p, shared());
        assert_eq!(choose(&[plain, paced, fitted]), Some(2));
        assert_eq!(choose(&[plain, fitted, paced]), Some(1));
        // Measured: both ask the same, the earlier wins.
        let m = platform(true);
        let paced = Candidate::new(Kind::Paced, 8.0, &m, shared());
        let fitted = Candidate::new(Kind::Fitted, 8.9, &m, shared());
        assert_eq!(choose(&[plain, fitted, paced]), Some(2));
    }
}
