//! The pure half of the port model (the probes are `../ports.rs`): what
//! the overlap of a send and a return, and the rates of transfers at
//! once, say the master's port is (`classify`), and how large the probes
//! that read them should be. Numbers in, numbers out.

use super::tuning::TUNING;
use dls_lp::Uplink;

/// What the port probes found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PortFindings {
    /// Times of a send and a return alone over their time at once.
    pub overlap: f64,
    /// Aggregate send rate of `group` workers at once over the fastest
    /// link's.
    pub send_gain: f64,
    /// The same for returns.
    pub return_gain: f64,
    /// Workers that carried transfers at once.
    pub group: usize,
    /// The model: "one port", "two ports" (full duplex, about one
    /// transfer's worth each way: gains below `dls_lp::TUNING.min_gain`) or "shared uplink".
    pub model: String,
    /// The uplink measured (none: one port).
    #[serde(skip)]
    pub uplink: Option<Uplink>,
    /// What the model was classified from: the aggregate rates (units a
    /// second) each way, and the fastest link's seconds a unit alone.
    #[serde(skip)]
    pub(crate) rates: Rates,
}

/// Aggregate rates (units a second) of transfers at once each way, and
/// the fastest link's seconds a unit alone each way.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rates {
    pub send: f64,
    pub best_c: f64,
    pub ret: f64,
    pub best_d: f64,
}

impl PortFindings {
    /// The findings with the sends at once read again at `rate` (units a
    /// second): the faster of the two readings, the model classified anew.
    pub fn sends_again(&self, rate: f64) -> PortFindings {
        let send = self.rates.send.max(rate);
        PortFindings::of(self.overlap, self.group, Rates { send, ..self.rates })
    }

    /// The findings of `group` workers at once: the model classified.
    pub fn of(overlap: f64, group: usize, rates: Rates) -> PortFindings {
        let uplink = classify(overlap, rates.send, rates.best_c, rates.ret, rates.best_d);
        let (send_gain, return_gain) = (rates.send * rates.best_c, rates.ret * rates.best_d);
        PortFindings {
            overlap,
            send_gain,
            return_gain,
            group,
            model: describe(uplink, send_gain, return_gain),
            uplink,
            rates,
        }
    }
}

/// The model from what was measured: `overlap`, and the aggregate rates
/// (units a second) of sends and returns at once against the best link's
/// seconds a unit each way.
pub fn classify(overlap: f64, send_rate: f64, best_c: f64, return_rate: f64, best_d: f64) -> Option<Uplink> {
    let duplex = overlap >= TUNING.duplex;
    let (send_gain, return_gain) = (send_rate * best_c, return_rate * best_d);
    if !duplex && send_gain < dls_lp::TUNING.min_gain && return_gain < dls_lp::TUNING.min_gain {
        return None;
    }
    // The uplink carries at least what the fastest link did alone, and what
    // the transfers at once carried together when that was more: what slows
    // a transfer down (a throttled receiver, a lost packet) only makes it
    // read slower than it is, never faster.
    let per_unit = |rate: f64, best: f64| if rate > 0.0 { best.min(1.0 / rate) } else { best };
    Uplink::new(per_unit(send_rate, best_c), per_unit(return_rate, best_d), duplex).ok()
}

/// Name of a model for people: "two ports" where the uplink carries less
/// than `dls_lp::TUNING.min_gain` times the fastest link each way (its rate as measured).
pub fn describe(uplink: Option<Uplink>, send_gain: f64, return_gain: f64) -> String {
    match uplink {
        None => "one port".into(),
        Some(u) if send_gain < dls_lp::TUNING.min_gain && return_gain < dls_lp::TUNING.min_gain && u.duplex => {
            "two ports (full duplex)".into()
        }
        Some(u) if u.duplex => "shared uplink (full duplex)".into(),
        Some(_) => "shared uplink (half duplex)".into(),
    }
}

/// The overlap of two transfers that took `a` and `b` seconds alone and
/// `together` at once: 1 plus the share of the shorter hidden under the
/// other (2: both at full speed, 1: one after the other), within [0, 2].
pub fn overlap_of(a: f64, b: f64, together: f64) -> f64 {
    (1.0 + (a + b - together) / a.min(b).max(1e-12)).clamp(0.0, 2.0)
}

/// The lengths of the next look at transfers at once, within `full` (each
/// about `secs` alone), from the look before (its lengths, and what it
/// took at once; `None`: this is the first). The first look carries half
/// of `full`: it warms the connections up and gives a rough rate; each
/// next one is sized to take about `secs` at once at the rate the one
/// before read, rather than `secs` for each link alone (behind an uplink
/// that carries a few links' worth at a time, that was several times
/// `secs`: on the switched test bed, `a:120:10 b:240:20 c:360:30
/// d:480:40` behind 500 Mbit/s at n = 256, 0.23-0.25 s a look, four
/// looks, a cold run's port probes 1.41 s). Every length at least one
/// value. In proportion to the links' rates, not split max-min fairly as
/// the uplink splits it (which would make them end together): on the
/// switched test bed (`a:80:30 b:160:20 c:240:10 d:320:40 e:400:25
/// f:120:50 g:200:15` behind 500 Mbit/s, n = 192; four calibrations),
/// looks split fairly read 77-92 products a second where the proportional
/// first looks of the same calibrations read 92-97: the nodes short of
/// processor did not keep up with an equal part.
pub fn looks(full: &[u64], before: Option<(&[u64], f64)>, secs: f64) -> Vec<u64> {
    let Some((lens, took)) = before else {
        return full.iter().map(|&l| l.div_ceil(2).max(1)).collect();
    };
    let scale = if took > 0.0 { secs / took } else { 1.0 };
    (full.iter().zip(lens))
        .map(|(&f, &l)| ((l as f64 * scale).ceil() as u64).clamp(1, f.max(1)))
        .collect()
}

/// Values (of `unit` a unit) that take about `secs` at `per_unit` seconds
/// a unit, within `max_units` units: a part of a unit where one unit takes
/// longer; at least one value.
pub fn values_for(secs: f64, per_unit: f64, unit: u64, max_units: u64) -> u64 {
    let units = (secs / per_unit.max(1e-12)).min(max_units.max(1) as f64);
    ((units * unit as f64).ceil() as u64).clamp(1, max_units.max(1) * unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_counts_the_shorter_transfer_hidden() {
        // Equal lengths: at once in the time of one (2), in the time of both (1).
        assert_eq!(overlap_of(1.0, 1.0, 1.0), 2.0);
        assert_eq!(overlap_of(1.0, 1.0, 2.0), 1.0);
        // 0.07 s and 0.10 s alone, 0.11 s at once: 0.06 s of the 0.07 s hidden.
        assert!((overlap_of(0.07, 0.10, 0.11) - (1.0 + 0.06 / 0.07)).abs() < 1e-12);
        // Taking turns and waiting besides: below 1, never below 0.
        assert!(overlap_of(1.0, 1.0, 2.5) < 1.0 && overlap_of(1.0, 1.0, 9.0) == 0.0);
    }

    #[test]
    fn each_model_is_told_apart() {
        // Best link: 1 ms a unit out, 0.5 ms back (1000 and 2000 units/s).
        let (c, d) = (1e-3, 5e-4);
        // Taking turns, no gain: the report's one port.
        assert_eq!(classify(1.02, 1000.0, c, 2000.0, d), None);
        // Overlap, little gain: two ports, the uplink as fast as the best
        // link (returns, slower at once) or as the sends at once (faster).
        assert_eq!(
            classify(1.9, 1050.0, c, 1900.0, d),
            Some(Uplink {
                send: 1.0 / 1050.0,
                ret: d,
                duplex: true
            })
        );
        assert_eq!(
            describe(classify(1.9, 1050.0, c, 1900.0, d), 1.05, 0.95),
            "two ports (full duplex)"
        );
        // Overlap and gain: the aggregate rates are the uplink's.
        let u = classify(1.95, 2500.0, c, 5000.0, d).expect("shared");
        assert!((u.send - 4e-4).abs() < 1e-12 && (u.ret - 2e-4).abs() < 1e-12 && u.duplex);
        assert_eq!(describe(Some(u), 2.5, 2.5), "shared uplink (full duplex)");
        // Gain without overlap: a shared half-duplex uplink.
        let h = classify(1.1, 3000.0, c, 2000.0, d).expect("shared");
        assert!((h.send - 1.0 / 3000.0).abs() < 1e-12 && h.ret == d && !h.duplex);
        assert_eq!(describe(Some(h), 3.0, 1.0), "shared uplink (half duplex)");
    }

    #[test]
    fn the_sends_read_again_keep_the_faster_reading() {
        // Best link: 1 ms a unit out, 0.5 ms back; sends at once first read
        // 1100 units/s (gain 1.1: two ports), returns 2000.
        let rates = Rates {
            send: 1100.0,
            best_c: 1e-3,
            ret: 2000.0,
            best_d: 5e-4,
        };
        let first = PortFindings::of(1.9, 4, rates);
        assert_eq!(first.model, "two ports (full duplex)");
        // Slower again: nothing changes.
        let same = first.sends_again(900.0);
        assert_eq!((same.send_gain, same.uplink), (first.send_gain, first.uplink));
        // Faster again (1500: gain 1.5): the uplink's send is 1/1500 s a
        // unit, and the model is classified anew, as `classify` says.
        let faster = first.sends_again(1500.0);
        assert_eq!(faster.uplink, classify(1.9, 1500.0, 1e-3, 2000.0, 5e-4));
        let u = faster.uplink.expect("shared");
        assert!((u.send - 1.0 / 1500.0).abs() < 1e-15 && u.ret == 5e-4 && u.duplex);
        assert!((faster.send_gain - 1.5).abs() < 1e-12 && faster.return_gain == first.return_gain);
        assert_eq!(faster.model, "shared uplink (full duplex)");
    }

    #[test]
    fn a_slow_link_carries_a_part_of_a_unit_at_once() {
        // 1000 values a unit; target 0.1 s.
        assert_eq!(values_for(0.1, 0.025, 1000, 64), 4000);
        // A unit takes 0.32 s: under a third of one, not one whole.
        assert_eq!(values_for(0.1, 0.32, 1000, 64), 313);
        // Never beyond the largest probe, never empty.
        assert_eq!(values_for(0.1, 1e-4, 1000, 8), 8000);
        assert_eq!(values_for(0.1, 1e9, 1000, 8), 1);
    }

    #[test]
    fn looks_at_once_take_about_the_target_together() {
        let full = [4000u64, 3000, 2000, 1];
        // The first: half of each, at least one value.
        assert_eq!(looks(&full, None, 0.1), vec![2000, 1500, 1000, 1]);
        // It took 0.125 s at once: the next, 0.8 of it, takes 0.1 s.
        let half = looks(&full, None, 0.1);
        assert_eq!(looks(&full, Some((&half, 0.125)), 0.1), vec![1600, 1200, 800, 1]);
        // At once as fast as alone (private links): never beyond `full`.
        assert_eq!(looks(&full, Some((&half, 0.05)), 0.1), full.to_vec());
        assert_eq!(looks(&full, Some((&half, 0.0)), 0.1), half);
    }
}
