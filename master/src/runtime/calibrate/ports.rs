//! The port model, measured from the network: how the master's transfers
//! to several workers get along. Two questions, each answered by timing
//! transfers alone and then at once:
//! - do a send to one worker and a return from another overlap? The
//!   *overlap* is 1 plus the share of the shorter one hidden under the
//!   other when both run at once: 2 when both directions run at full
//!   speed at once (full duplex), 1 when they take turns (one port);
//! - what do sends to several workers at once achieve together? Their
//!   aggregate rate over the fastest link's rate (the *gain*) is 1 when the
//!   master's uplink carries one transfer's worth at a time, more when
//!   transfers share it; the aggregate is the uplink's rate. The same for
//!   returns.
//!
//! One port (no overlap, no gain) is the report's model and needs no
//! `[uplink]`; anything else is a shared uplink with the rates measured
//! (`Ports::Shared`), which with no gain but overlap is the two-port model.
//! Deciding is `classify`, pure; the probes are thin.

use super::compute::Measured;
use super::TUNING;
use super::{agree, answer, unit_values, CalibrateOptions};
use crate::runtime::link::Link;
use anyhow::{bail, Context, Result};
use dls_lp::Uplink;
use dls_protocol::{DType, FromWorker, ToWorker, Values};
use std::time::Instant;

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
    rates: Rates,
}

#[derive(Debug, Clone, Copy, Default)]
struct Rates {
    send: f64,
    best_c: f64,
    ret: f64,
    best_d: f64,
}

impl PortFindings {
    /// The findings with the sends at once read again at `rate` (units a
    /// second): the faster of the two readings, the model classified anew.
    fn sends_again(&self, rate: f64) -> PortFindings {
        let send = self.rates.send.max(rate);
        PortFindings::of(self.overlap, self.group, Rates { send, ..self.rates })
    }

    fn of(overlap: f64, group: usize, rates: Rates) -> PortFindings {
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

/// How long each probe transfer should take: long beside timer noise and
/// a network's round trips, short beside the whole calibration.
fn target_seconds(opts: &CalibrateOptions) -> f64 {
    (10.0 * opts.max_probe_seconds).clamp(0.01, TUNING.probe_seconds)
}

/// The largest probe of a worker here: `TUNING.max_bytes` each way, within
/// half its memory.
fn cap(m: &Measured, opts: &CalibrateOptions) -> u64 {
    let (unit_in, _) = unit_values(&opts.form);
    m.max_units.min(TUNING.max_bytes / (8 * unit_in).max(1)).max(1)
}

/// The overlap of two transfers that took `a` and `b` seconds alone and
/// `together` at once: 1 plus the share of the shorter hidden under the
/// other (2: both at full speed, 1: one after the other), within [0, 2].
pub fn overlap_of(a: f64, b: f64, together: f64) -> f64 {
    (1.0 + (a + b - together) / a.min(b).max(1e-12)).clamp(0.0, 2.0)
}

/// The links by their send cost, fastest first, and the values a send
/// probe carries (as many as the largest probe's units take).
fn fastest_first(links: &mut [(&mut Link, Measured)], opts: &CalibrateOptions) -> Values {
    links.sort_by(|a, b| a.1.c.total_cmp(&b.1.c));
    let (unit_in, _) = unit_values(&opts.form);
    let largest = links.iter().map(|l| l.1.max_units).max().unwrap_or(1);
    Values::zeros(DType::F64, (unit_in * largest) as usize)
}

/// Measure the port model with the workers' links (at least two) and their
/// link measurements.
pub(super) async fn measure(links: Vec<(&mut Link, Measured)>, opts: &CalibrateOptions) -> Result<PortFindings> {
    if links.len() < 2 {
        bail!("the port model needs two workers or more");
    }
    let mut links = links;
    let buf = fastest_first(&mut links, opts);
    let secs = target_seconds(opts);
    let t0 = Instant::now();

    // Overlap: the fastest sender against the fastest other returner.
    let (first, rest) = links.split_at_mut(1);
    let a = &mut first[0];
    let b = rest
        .iter_mut()
        .min_by(|x, y| x.1.d.total_cmp(&y.1.d))
        .context("a second worker")?;
    let secs = secs
        .min(cap(&a.1, opts) as f64 * a.1.c)
        .min(cap(&b.1, opts) as f64 * b.1.d);
    // Parts of a unit where one takes longer than `secs`, as the
    // aggregates below: with products of 1024×1024 behind 300 Mbit/s,
    // whole units made this look 0.36 s a transfer and 0.95 s in all, two
    // thirds of a cold run's port probes.
    let (unit_in, unit_out) = unit_values(&opts.form);
    let len_a = values_for(secs, a.1.c, unit_in, cap(&a.1, opts));
    let len_b = values_for(secs, b.1.d, unit_out, cap(&b.1, opts));
    let (ka, kb) = (len_a as f64 / unit_in as f64, len_b as f64 / unit_out as f64);
    // Each time the shortest of its repetitions: on a real network a lost
    // packet only ever adds time (a retransmission timeout of 200 ms
    // and more), which a median of two or three can still hold. Alone,
    // each is timed once, and what the link probes say is taken if less.
    let measured_a = send(a.0, len_a, &buf, opts).await?;
    let measured_b = pull(b.0, len_b, opts).await?;
    let (alone_a, alone_b) = (measured_a.min(ka * a.1.c), measured_b.min(kb * b.1.d));
    let mut together = f64::INFINITY;
    for _ in 0..opts.port_reps.max(1) {
        together = together.min(at_once((a.0, len_a), (b.0, len_b), &buf, opts).await?);
        // Repetitions can only shorten `together`, so raise the overlap:
        // once it is clearly full duplex, they would change nothing.
        if overlap_of(alone_a, alone_b, together) >= TUNING.duplex + TUNING.clear {
            break;
        }
    }
    let mut overlap = overlap_of(alone_a, alone_b, together);
    // Not clearly full duplex, where each link was timed once (a run's
    // probes, `reps` 1): each transfer timed again alone and both at once,
    // and the overlap judged on these timings rather than the probes',
    // timed at another moment (a node under a processor quota sends or
    // returns in a burst and pays for it after). In cold runs on the
    // switched test bed (`a:400:5 b:300:8 c:200:60 d:100:30`, n = 384),
    // three of eight read the uplink half duplex from the probes
    // (overlaps 0.99-1.36 where `dls calibrate` reads 1.55-1.88), planned
    // on it 1.7 times longer and took 20.5-36.8 s against 13.7-15.7 s.
    // `dls calibrate`'s link costs, fitted over sizes and repetitions, stay
    // the measure alone: on a loaded machine fresh timings read the
    // emulated one-port uplink of `master/tests/ports.rs` full duplex.
    if overlap < TUNING.duplex + TUNING.clear && opts.reps <= 1 {
        let again_a = send(a.0, len_a, &buf, opts).await?;
        let again_b = pull(b.0, len_b, opts).await?;
        let together = together.min(at_once((a.0, len_a), (b.0, len_b), &buf, opts).await?);
        overlap = overlap_of(again_a.min(measured_a), again_b.min(measured_b), together);
    }
    tracing::debug!(
        overlap,
        alone_a,
        alone_b,
        together,
        secs = t0.elapsed().as_secs_f64(),
        "port probes: overlap"
    );
    // What the overlap timed alone, a unit: the fastest sender's, and the
    // returner's (by name: the fastest returner may be the sender).
    let sent_alone = alone_a / ka;
    let returned_alone = (b.0.name.clone(), alone_b / kb);

    // Aggregates: the fastest links each way, carrying about `secs` each,
    // against the fastest alone (timed here once, with the same sizes,
    // unless the overlap just did).
    let group = links.len().min(TUNING.group);
    let (send_rate, best_c) = aggregate(&mut links, group, true, Some(sent_alone), &buf, secs, opts).await?;
    links.sort_by(|a, b| a.1.d.total_cmp(&b.1.d));
    let known = (links[0].0.name == returned_alone.0).then_some(returned_alone.1);
    let (return_rate, best_d) = aggregate(&mut links, group, false, known, &buf, secs, opts).await?;
    tracing::debug!(
        send_rate,
        return_rate,
        secs = t0.elapsed().as_secs_f64(),
        "port probes: aggregates"
    );
    let rates = Rates {
        send: send_rate,
        best_c,
        ret: return_rate,
        best_d,
    };
    Ok(PortFindings::of(overlap, group, rates))
}

/// The sends at once timed again, seconds after [`measure`] (`dls
/// calibrate` does it after the costs under load): the faster of the two
/// readings is the uplink's. On the switched test bed (`a:80:30 b:160:20
/// c:240:10 d:320:40 e:400:25 f:120:50 g:200:15` behind 500 Mbit/s,
/// n = 192) eighteen calibrations read the sends at once at 87-100
/// products a second, most at 95-100, the low ones alone among their
/// neighbours (calibrations 8 s apart): what the emulated network carries
/// drifts with this machine's processors. The suite whose calibration
/// read 87 ran its plan in 0.81-0.87 of the prediction; a file that read
/// 97, 0.90-0.98.
pub(super) async fn again(
    links: Vec<(&mut Link, Measured)>,
    found: &mut PortFindings,
    opts: &CalibrateOptions,
) -> Result<()> {
    let mut links = links;
    if links.len() < 2 || found.uplink.is_none() {
        return Ok(());
    }
    let buf = fastest_first(&mut links, opts);
    let group = found.group.min(links.len());
    let known = Some(found.rates.best_c);
    let (rate, _) = aggregate(&mut links, group, true, known, &buf, target_seconds(opts), opts).await?;
    tracing::debug!(
        before = found.rates.send,
        again = rate,
        "port probes: sends at once again"
    );
    *found = found.sends_again(rate);
    Ok(())
}

/// Units a second that the first `group` links carry together, sends or
/// returns, each carrying what takes it about `secs` alone (a part of a
/// unit on a slow link, so that none holds the probe beyond `secs`: on
/// the switched test bed, `a:60:40 b:120:10 c:240:30 d:480:20` behind 500
/// Mbit/s at n = 384, one whole unit to `a` took 0.32 s, the sends at once
/// read 18-21 units/s where the uplink carries 26, and a cold run's port
/// probes took 1.57-1.68 s; with parts, 24 units/s in 1.15-1.26 s), half
/// of that at the first look and about `secs` together at the next ones
/// ([`looks`]), and the seconds a unit the first link takes alone
/// (`known` if the overlap just timed it, else timed here; the link
/// probes' measure if smaller).
async fn aggregate(
    links: &mut [(&mut Link, Measured)],
    group: usize,
    sends: bool,
    known: Option<f64>,
    buf: &Values,
    secs: f64,
    opts: &CalibrateOptions,
) -> Result<(f64, f64)> {
    let per_unit = |m: &Measured| if sends { m.c } else { m.d };
    let (unit_in, unit_out) = unit_values(&opts.form);
    let unit = if sends { unit_in } else { unit_out };
    // The same duration for every one, within the largest probe of each,
    // so that they end together and none runs alone at the end.
    let secs = (links.iter().take(group))
        .map(|(_, m)| cap(m, opts) as f64 * per_unit(m))
        .fold(secs, f64::min);
    let lens: Vec<u64> = (links.iter().take(group))
        .map(|(_, m)| values_for(secs, per_unit(m), unit, cap(m, opts)))
        .collect();
    let transfer = async |link: &mut Link, len: u64| {
        if sends {
            send(link, len, buf, opts).await
        } else {
            pull(link, len, opts).await
        }
    };
    // The fastest alone, once (the link probes measured it already). A
    // run's probes measured it too, but a port model made without timing
    // it here (and the send and return of the overlap) again measured
    // the uplink 5-10% slower and its plans ran 15% longer: the transfers
    // alone also warm the connections up for the transfers at once. The
    // overlap's own transfers alone, just before, are such a measure.
    let alone = match known {
        Some(secs) => secs,
        None => transfer(links[0].0, lens[0]).await? * unit as f64 / lens[0] as f64,
    };
    let full = lens;
    let mut lens = looks(&full, None, secs);
    let mut rates = Vec::new();
    for rep in 0..opts.port_reps.max(1) {
        if rep == 2 && agree(&rates) {
            break;
        }
        let units = lens.iter().sum::<u64>() as f64 / unit as f64;
        let t0 = Instant::now();
        let transfers = (links.iter_mut().zip(&lens)).map(|((link, _), &len)| transfer(link, len));
        for r in super::compute::join_all(transfers.collect()).await {
            r?;
        }
        let took = t0.elapsed().as_secs_f64();
        rates.push(units / took);
        tracing::debug!(sends, units = ?lens.iter().map(|&l| l as f64 / unit as f64).collect::<Vec<_>>(),
            secs = took, "port probes: transfers at once");
        // Clearly slower than the fastest link at the first: the rate would
        // not be used (the uplink is then the best link), so it needs no
        // second look. Otherwise it does: the rate is the uplink's, and a
        // first look can be far off (a run's own calibration on the
        // emulated star, the first look only: the uplink 1.25× and 1.7×
        // slower than `dls calibrate` measured, and the run took 18 s
        // against 11).
        if rep == 0 && rates[0] * per_unit(&links[0].1).min(alone) < 1.0 - TUNING.clear {
            break;
        }
        lens = looks(&full, Some((&lens, took)), secs);
    }
    // The faster of the link probes' measure and this one's: a link slowed
    // down by chance while timed alone would make a gain out of nothing.
    let best = if sends { links[0].1.c } else { links[0].1.d };
    // The fastest repetition, as for the overlap: what slows transfers (a
    // lost packet, a connection's first large transfer in a while) only
    // adds time.
    let rate = rates.iter().copied().fold(0.0, f64::max);
    Ok((rate, alone.min(best)))
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
fn looks(full: &[u64], before: Option<(&[u64], f64)>, secs: f64) -> Vec<u64> {
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
fn values_for(secs: f64, per_unit: f64, unit: u64, max_units: u64) -> u64 {
    let units = (secs / per_unit.max(1e-12)).min(max_units.max(1) as f64);
    ((units * unit as f64).ceil() as u64).clamp(1, max_units.max(1) * unit)
}

/// Seconds to send `len` values of `buf` to a worker (until it
/// acknowledges them).
async fn send(link: &mut Link, len: u64, buf: &Values, opts: &CalibrateOptions) -> Result<f64> {
    let t0 = Instant::now();
    link.conn
        .write_frame(&ToWorker::Echo { len }, &buf.slice(0..len as usize))
        .await
        .with_context(|| format!("worker {:?}: sending a probe", link.name))?;
    match answer(link, opts.timeout, "send probe").await?.msg {
        FromWorker::EchoAck { len: l } if l == len => Ok(t0.elapsed().as_secs_f64()),
        other => bail!("worker {:?}: unexpected answer to a send probe: {other:?}", link.name),
    }
}

/// Seconds for a send of `len_a` values of `buf` to one worker and a
/// return of `len_b` from another, at once.
async fn at_once(
    (a, len_a): (&mut Link, u64),
    (b, len_b): (&mut Link, u64),
    buf: &Values,
    opts: &CalibrateOptions,
) -> Result<f64> {
    let t0 = Instant::now();
    let (x, y) = tokio::join!(send(a, len_a, buf, opts), pull(b, len_b, opts));
    x?;
    y?;
    Ok(t0.elapsed().as_secs_f64())
}

/// Seconds to have `len` values of results returned by a worker.
async fn pull(link: &mut Link, len: u64, opts: &CalibrateOptions) -> Result<f64> {
    let t0 = Instant::now();
    link.conn.send(&ToWorker::Pull { len }).await?;
    let f = answer(link, opts.timeout, "return probe").await?;
    match f.msg {
        FromWorker::PullData { len: l } if l == len && f.payload.len() as u64 == len => Ok(t0.elapsed().as_secs_f64()),
        other => bail!("worker {:?}: unexpected answer to a return probe: {other:?}", link.name),
    }
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
