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
//! Deciding is `model::ports::classify`, pure; the probes here are thin.

use super::compute::Measured;
use super::model::ports::{looks, values_for, Rates};
use super::model::ports::{overlap_of, PortFindings};
use super::TUNING;
use super::{agree, answer, unit_values, CalibrateOptions};
use crate::runtime::link::Link;
use anyhow::{bail, Context, Result};
use dls_protocol::{DType, FromWorker, ToWorker, Values};
use std::time::Instant;

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
