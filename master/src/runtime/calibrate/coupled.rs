//! A worker's costs while it receives, computes and returns at once. The
//! model lets a worker's three phases overlap freely, each at its own
//! cost; a node whose networking and computing share one small processor
//! share (a container's or a job's CPU quota) does them more slowly
//! together than one at a time. With two lanes (a full-duplex uplink) a
//! run sends a worker its next chunk while it computes one and returns
//! the last, so this is measured where the port model found two lanes: the
//! worker computes k units while the master sends it k and takes k back,
//! all at once (as a run's steady state does per unit), and each phase's
//! time over its time alone is that phase's factor.
//!
//! On the switched test bed with each worker's whole process capped
//! (`DLS_TESTBED_CAP=process`), a node at 40% of a core received 1.22×,
//! computed 1.54× and returned 1.12× slower in a run than its probes
//! alone said, and the run ended 1.28× after its prediction.
//!
//! These probes scatter more than those of one phase alone: on the skewed
//! test-bed star (fastest link on 20% of a core) two calibrations of two
//! repetitions each put that node's send at 1.27, 1.42, 1.12, 1.49× and
//! its computing at 2.1-3.8× (runs: 1.1-1.3× and about 1.5×). The
//! faster of two is kept: interference from outside the node only adds
//! time.

use super::{answer_of, unit_values, CalibrateOptions, AGREE};
use crate::runtime::link::Link;
use anyhow::{bail, Result};
use dls_protocol::{FromWorker, ToWorker, Values};
use std::time::Instant;

/// Each probe takes about this long: long beside a processor quota's
/// periods (10-100 ms), short beside the whole calibration.
pub const SECONDS: f64 = 0.25;

/// A factor within the noise of repeated probes counts as none.
const NOISE: f64 = 1.0 + AGREE;

/// A worker's costs a unit alone (from its fits), and its largest probe.
#[derive(Debug, Clone, Copy)]
pub struct Alone {
    pub c: f64,
    pub w: f64,
    pub d: f64,
    pub max_units: u64,
}

/// What one probe measured: seconds to the send's acknowledgement, to the
/// return's last byte, and of computing (the worker's own timing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Together {
    pub units: u64,
    pub send: f64,
    pub ret: f64,
    pub compute: f64,
}

/// The factors (send, compute, return) from the fastest of `probes`, each
/// at least 1: 1 where a phase took no longer than the noise allows. A
/// worker answers in order, so the send's acknowledgement waits behind a
/// return still being written: a send that ended no later than just after
/// the return (within the noise) measured nothing of its own, and keeps
/// factor 1.
pub fn factors(alone: &Alone, probes: &[Together]) -> [f64; 3] {
    let best = |f: &dyn Fn(&Together) -> Option<f64>| probes.iter().filter_map(f).fold(f64::INFINITY, f64::min);
    let ratio = |t: &Together, secs: f64, per_unit: f64| secs / (t.units as f64 * per_unit).max(1e-12);
    let send = best(&|t| (t.send > NOISE * t.ret).then(|| ratio(t, t.send, alone.c)));
    let compute = best(&|t| Some(ratio(t, t.compute, alone.w)));
    let ret = best(&|t| Some(ratio(t, t.ret, alone.d)));
    [send, compute, ret].map(|f| if f.is_finite() && f > NOISE { f } else { 1.0 })
}

/// Units for one probe: about [`SECONDS`] of the slowest phase, within
/// the worker's largest probe.
pub fn units(alone: &Alone) -> u64 {
    let per_unit = alone.c.max(alone.w).max(alone.d).max(1e-12);
    ((SECONDS / per_unit).round() as u64).clamp(1, alone.max_units.max(1))
}

/// `reps` probes of one worker (the port is the caller's: nothing else
/// may cross it meanwhile).
pub async fn measure(link: &mut Link, alone: &Alone, reps: usize, opts: &CalibrateOptions) -> Result<Vec<Together>> {
    let k = units(alone);
    let (unit_in, unit_out) = unit_values(&opts.form);
    let buf = Values::zeros(dls_protocol::DType::F64, (unit_in * k) as usize);
    let mut out = Vec::new();
    for _ in 0..reps.max(1) {
        out.push(once(link, k, (unit_in * k, unit_out * k), &buf, opts).await?);
    }
    Ok(out)
}

/// One probe of `k` units: `len` values out and back.
async fn once(link: &mut Link, k: u64, len: (u64, u64), buf: &Values, opts: &CalibrateOptions) -> Result<Together> {
    let (name, form, timeout) = (link.name.clone(), opts.form, opts.timeout);
    let t0 = Instant::now();
    let mut lent = link.conn.lend();
    let (reader, writer) = (&mut lent.reading, &mut lent.writing);
    let write = async {
        writer.send(&ToWorker::ComputeProbe { form, count: k as u32 }).await?;
        writer.send(&ToWorker::Pull { len: len.1 }).await?;
        writer.write_frame(&ToWorker::Echo { len: len.0 }, buf).await?;
        anyhow::Ok(())
    };
    let read = async {
        // NaN until answered.
        let mut t = Together {
            units: k,
            send: f64::NAN,
            ret: f64::NAN,
            compute: f64::NAN,
        };
        while t.send.is_nan() || t.ret.is_nan() || t.compute.is_nan() {
            match answer_of(reader, &name, timeout, "probe under load").await? {
                FromWorker::EchoAck { len: l } if l == len.0 => t.send = t0.elapsed().as_secs_f64(),
                FromWorker::PullData { len: l } if l == len.1 => t.ret = t0.elapsed().as_secs_f64(),
                FromWorker::ComputeDone { secs, .. } => t.compute = secs,
                other => bail!("worker {name:?}: unexpected answer during a probe under load: {other:?}"),
            }
        }
        anyhow::Ok(t)
    };
    let (w, r) = tokio::join!(write, read);
    w?;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALONE: Alone = Alone {
        c: 0.04,
        w: 0.01,
        d: 0.02,
        max_units: 32,
    };

    #[test]
    fn factors_are_each_phase_over_its_time_alone() {
        // 6 units: alone 0.24 s out, 0.06 s computing, 0.12 s back.
        let t = Together {
            units: 6,
            send: 0.30,
            ret: 0.15,
            compute: 0.09,
        };
        let f = factors(&ALONE, &[t]);
        assert!(
            (f[0] - 1.25).abs() < 1e-12 && (f[1] - 1.5).abs() < 1e-12 && (f[2] - 1.25).abs() < 1e-12,
            "{f:?}"
        );
        // The fastest of two probes is kept, phase by phase.
        let slower = Together {
            send: 0.36,
            ret: 0.13,
            ..t
        };
        let f = factors(&ALONE, &[slower, t]);
        assert!((f[0] - 1.25).abs() < 1e-12 && (f[2] - 0.13 / 0.12).abs() > 0.0, "{f:?}");
    }

    #[test]
    fn noise_and_a_send_held_behind_its_return_count_as_none() {
        // Within the noise (or faster than alone): factor 1.
        let t = Together {
            units: 10,
            send: 0.42,
            ret: 0.19,
            compute: 0.105,
        };
        assert_eq!(factors(&ALONE, &[t]), [1.0; 3]);
        // The send's acknowledgement came after the return: it measured the
        // return, not the send.
        let held = Together {
            units: 10,
            send: 0.61,
            ret: 0.60,
            compute: 0.1,
        };
        let f = factors(&ALONE, &[held]);
        assert_eq!(f[0], 1.0);
        assert!((f[2] - 3.0).abs() < 1e-12, "{f:?}");
    }

    #[test]
    fn probes_take_about_their_target_within_the_largest() {
        // The send is the slowest phase: 0.25 s / 0.04 s.
        assert_eq!(units(&ALONE), 6);
        assert_eq!(units(&Alone { max_units: 4, ..ALONE }), 4);
        assert_eq!(units(&Alone { c: 10.0, ..ALONE }), 1);
    }
}
