//! The pure half of costs under load (the probe is `../coupled.rs`): what
//! a pipeline's arrivals, computings and returns say of a worker's steady
//! state, the factors over its costs alone, and how large a pipeline a
//! worker's memory and costs allow. Numbers in, numbers out: tested
//! without a socket (`load/tests.rs`).

use super::tuning::TUNING;

/// A worker's costs a unit alone (from its fits), and its largest probe.
#[derive(Debug, Clone, Copy)]
pub struct Alone {
    pub c: f64,
    pub w: f64,
    pub d: f64,
    /// Seconds a return takes beyond `d` a unit (its latency), which a
    /// plan adds once a chunk.
    pub ret_latency: f64,
    /// Units the pipeline may hold at once ([`room`]).
    pub room: u64,
    /// Units of the worker's largest probe: no chunk is larger.
    pub largest: u64,
}

/// What one pipeline measured: `units` a chunk, and for each chunk when
/// it was in (the worker's `Received`), computed (`Ready`) and back (its
/// results read), in seconds from the pipeline's start, and the seconds
/// the worker timed computing it (`Ready`'s `compute_secs`).
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    pub units: u64,
    pub received: Vec<f64>,
    pub ready: Vec<f64>,
    pub back: Vec<f64>,
    pub computed: Vec<f64>,
}

impl Pipeline {
    /// Seconds a unit in the steady state: the mean spacing of the chunks
    /// arriving, computed or back, whichever is slowest. `None` with fewer
    /// than two chunks in any of the three.
    pub fn cycle(&self) -> Option<f64> {
        let spacing = |t: &[f64]| match t {
            [first, .., last] => Some((last - first) / (t.len() - 1) as f64),
            _ => None,
        };
        let s = [&self.received, &self.ready, &self.back].map(|t| spacing(t));
        if self.units == 0 || s.iter().any(Option::is_none) {
            return None;
        }
        let slowest = s.iter().flatten().copied().fold(0.0, f64::max);
        Some(slowest / self.units as f64)
    }

    /// Seconds a unit the chunks spent computing, as the worker timed it:
    /// the mean over the chunks after the first (which meets cold caches).
    /// Not from when the master heard of them: a worker's `Received` and
    /// `Ready` queue behind the results it is writing, so on the switched
    /// test bed, with results twice the inputs, chunks seemed to compute
    /// for as long as a return took (3.3× their cost alone; the runs'
    /// corrections then found computing at 0.2-0.8× the platform's), and at
    /// n = 256 4.2× where the worker timed 2.5×, as in the runs. `None`
    /// with fewer than two chunks.
    pub fn computing(&self) -> Option<f64> {
        let n = self.computed.len();
        if n < 2 || self.units == 0 {
            return None;
        }
        self.per_unit(self.computed[1..].iter().sum(), n)
    }

    /// Seconds a unit the chunks' results took to come back: from when a
    /// chunk was computed and the one before was back (a worker returns
    /// one at a time) until it was back; the mean over the chunks after
    /// the first. Unlike the spacing of the returns, it leaves out the
    /// pipeline's fill: on the switched test bed, with results twice the
    /// inputs (512×128 by 128×512), a worker's returns came back every
    /// 36 ms, its cost alone, after a first gap of 91 ms while the third
    /// chunk was still arriving; over the 16 chunks their spacing read
    /// 1.15× its cost alone. `None` with fewer than two chunks or times out
    /// of order.
    pub fn returning(&self) -> Option<f64> {
        let n = self.back.len().min(self.ready.len());
        if n < 2 || self.units == 0 {
            return None;
        }
        let busy: f64 = (1..n).map(|i| self.back[i] - self.ready[i].max(self.back[i - 1])).sum();
        self.per_unit(busy, n)
    }

    /// `busy` seconds over the `n - 1` chunks after the first, a unit;
    /// `None` when times out of order make it negative or not a number.
    fn per_unit(&self, busy: f64, n: usize) -> Option<f64> {
        let per = busy / ((n - 1) as f64 * self.units as f64);
        (per.is_finite() && per >= 0.0).then_some(per)
    }
}

/// The factor: the mean of `probes`' steady states over the slowest phase
/// alone, 1 within the noise (or faster). The mean, not the fastest: what
/// slows a node under load comes and goes (a quota's throttling, queues
/// filling), and a run pays it on average. Two pipelines of 0.7 s, the
/// faster kept, put the test bed's node at 40% of a core at 1.0 where its
/// runs paid 1.1, and one at 20% at 1.0 and 1.2 where they paid 1.4.
pub fn factor(alone: &Alone, probes: &[Pipeline]) -> f64 {
    past_noise(mean(probes, Pipeline::cycle) / slowest(alone))
}

/// A factor, or 1 where it is within the noise (or faster, or not a
/// number: nothing measured).
fn past_noise(f: f64) -> f64 {
    if f.is_finite() && f > TUNING.noise {
        f
    } else {
        1.0
    }
}

/// The factors (send, compute, return) of a worker's costs under load:
/// sending the steady state's ([`factor`]), computing at least that and
/// at least what the worker timed its chunks against their cost alone
/// ([`Pipeline::computing`]), returning its own time against its cost
/// alone ([`Pipeline::returning`]), each 1 within the noise. On square
/// products the returns are not the bottleneck, and their own factor
/// changed no plan (same calibration, either factor: predictions within
/// 0.1%). The steady state is
/// what the slowest phase allows; a node short of processor also
/// computes each chunk more slowly while the next arrives (its receiving
/// takes the same processor), which its link hides in the pipeline's
/// steady state but not in a plan: the plan times when each chunk is
/// back, and sends wait for those returns (a worker holds at most lag + 1
/// chunks). On the switched test bed, the node on two fifths of a core
/// computed a run's 384×384 products in 1.5-2.2× their time alone while
/// its link set the pace (factor 1.0); its plan left 0.73 s of gaps
/// between its sends and ran 1.17-1.24× its prediction.
pub fn factors(alone: &Alone, probes: &[Pipeline]) -> [f64; 3] {
    let f = factor(alone, probes);
    let m = mean(probes, Pipeline::computing) / alone.w.max(1e-12);
    // Kept only where what it adds to a unit beyond the steady state's is
    // worth timing (`TUNING.worth`). A cost alone at calibration's floor would
    // give a factor no platform file takes: held to the most one may hold.
    let worth = (m - f) * alone.w >= TUNING.worth * slowest(alone);
    let fw = if m.is_finite() && m > TUNING.noise && worth {
        m.max(f)
    } else {
        f
    };
    let fw = fw.min(crate::config::platform_file::MAX_UNDER_LOAD);
    // A return's own time less its latency, which a plan adds a chunk
    // apart from `d`: emulated links on loopback, small chunks, read
    // 1.4-1.6× with it in.
    let returning = |p: &Pipeline| Some(p.returning()? - alone.ret_latency / p.units.max(1) as f64);
    [f, fw, own_factor(probes, returning, alone.d)]
}

/// The mean of `phase`'s seconds a unit over `probes` against its cost
/// `alone`, 1 within the noise (or faster), and held to what a platform
/// file may hold.
fn own_factor(probes: &[Pipeline], phase: impl Fn(&Pipeline) -> Option<f64>, alone: f64) -> f64 {
    past_noise(mean(probes, phase) / alone.max(1e-12)).min(crate::config::platform_file::MAX_UNDER_LOAD)
}

/// The mean of `phase` over the probes that measured it (NaN: none).
fn mean(probes: &[Pipeline], phase: impl Fn(&Pipeline) -> Option<f64>) -> f64 {
    let times: Vec<f64> = probes.iter().filter_map(&phase).collect();
    times.iter().sum::<f64>() / times.len() as f64
}

/// Units a chunk: about `TUNING.chunk_seconds` of the slowest phase, at least
/// `TUNING.window` chunks within the units the pipeline may hold at once, and
/// no more than the largest probe (16 MiB at most): on fast links a chunk
/// of 0.25 s is hundreds of megabytes (before this bound, one of three
/// calibrations of 32 loopback workers took 10.4 s instead of 3.2 s).
pub fn units(alone: &Alone) -> u64 {
    let most = (alone.room / TUNING.window).min(alone.largest).max(1);
    ((TUNING.chunk_seconds / slowest(alone)).round() as u64).clamp(1, most)
}

/// Chunks of `units` in one pipeline: about `TUNING.pipeline_seconds` of the
/// slowest phase, within `TUNING.min_chunks` and `TUNING.chunks`. `None` when the
/// units it may hold at once hold fewer than `TUNING.fewest` chunks: too few
/// in flight for a steady state (a worker refuses a chunk its memory
/// cannot hold).
pub fn chunks(alone: &Alone, units: u64) -> Option<u64> {
    let per_chunk = units.max(1) as f64 * slowest(alone);
    let wanted = ((TUNING.pipeline_seconds / per_chunk).floor() as u64).clamp(TUNING.min_chunks, TUNING.chunks);
    (window(alone, units) >= TUNING.fewest).then_some(wanted)
}

/// Chunks of `units` a pipeline holds at once (sent, not yet back):
/// `TUNING.window`, or as many as the units it may hold. A chunk is sent once
/// the one this many before it is back, as a run holds a few chunks on a
/// worker. Before, a pipeline held all its chunks at once, so they had to
/// fit the largest probe: products of 256×256 (a probe of 16 units) went
/// in 16 chunks of one, 0.3 s in all where a link took 19 ms a unit.
pub fn window(alone: &Alone, units: u64) -> u64 {
    (alone.room / units.max(1)).min(TUNING.window)
}

/// Units a pipeline may hold on a worker whose largest probe is `largest`
/// units and whose memory holds `max_load`: that probe, or half its
/// memory. The largest probe carries at most 16 MiB, one product of
/// 768×768 (9.4 MB of inputs): with that alone there was no pipeline, and
/// the platform said nothing of the slowdown under load its runs then paid
/// (on the switched test bed, `a:240:10 b:480:20 c:720:30 d:960:40`, the
/// node at two fifths of a core computed 1.5-1.9× slower in runs and the
/// plans leaning on it ran 1.18-1.20× their predictions).
pub fn room(largest: u64, max_load: u64) -> u64 {
    largest.max(max_load / 2)
}

/// Seconds a unit of the slowest phase alone.
fn slowest(alone: &Alone) -> f64 {
    alone.c.max(alone.w).max(alone.d).max(1e-12)
}

#[cfg(test)]
mod tests;
