//! What the daemon is told at start ([`Config`]), the emulation settings
//! it carries ([`SpeedChange`], [`Reference`]) and the limits every
//! session keeps. Read by the accept loop (`server.rs`) and by each
//! session (`session.rs`); neither imports the other for them.

use crate::kernel;
use crate::throttle::{SharedUplink, Throttled};
use dls_protocol::{Capabilities, Connection, Form, FromWorker, ToWorker, Token};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// A session refuses more chunks than this in flight (received and not yet
/// returned), whatever their size: it bounds the compute queues.
pub const MAX_IN_FLIGHT: usize = 1024;

/// Seconds a session may stay silent before the worker ends it (masters
/// send a heartbeat every quarter second while they hold a worker).
pub const DEFAULT_IDLE_SECS: u64 = 20;

/// Everything the daemon is told at start.
#[derive(Debug, Clone)]
pub struct Config {
    /// Shared token; `None` accepts any master (loopback or `--insecure`).
    pub token: Option<Token>,
    /// Threads of the matrix kernel.
    pub threads: usize,
    /// Bytes of matrices (A, B, C) held at once.
    pub memory_limit: u64,
    /// Emulation: computing takes this many times longer (1 = off).
    pub slowdown: f64,
    /// Emulation: from this product of each job on, computing takes this
    /// many times as long again (a worker whose speed changes partway
    /// through a batch). The wait cannot go below none: speeding up needs
    /// a slowdown to take back.
    pub speed_change: Option<SpeedChange>,
    /// Emulation: bytes per second each way on this worker's connection.
    pub link_rate: Option<f64>,
    /// Emulation: an uplink this worker's connection shares with the other
    /// daemons of this process (see [`SharedUplink`]).
    pub uplink: Option<SharedUplink>,
    /// Compute only on the kernel's own threads (`Kernel::isolated`).
    pub isolate_compute: bool,
    /// Emulation: compute every product this many times (1 = off). Unlike
    /// `slowdown`, which waits, this is real work, so a CPU quota on the
    /// daemon scales it: the test bed's slower processors.
    pub work_factor: u32,
    pub handshake_timeout: Duration,
    /// Connections open at once (authenticated or not); at the cap the
    /// oldest unauthenticated one is dropped for a newcomer.
    pub max_connections: usize,
    /// A session whose master sends nothing (no frame, no heartbeat) for
    /// this long ends, and the worker serves the next master.
    pub idle_timeout: Duration,
    /// Serve only masters that encrypt every frame (`--encrypt`; needs a
    /// token). Masters may ask for encryption either way.
    pub encrypt: bool,
    /// Emulation: the one-product times that `slowdown` multiplies,
    /// measured once per form. Daemons started in one process (`dls demo`,
    /// the experiments) share one, so their emulated speeds keep the
    /// ratios asked for rather than each carrying its own measurement's
    /// noise.
    pub reference: Arc<Reference>,
}

impl Config {
    pub fn new(threads: usize, memory_limit: u64) -> Self {
        Config {
            token: None,
            threads,
            memory_limit,
            slowdown: 1.0,
            speed_change: None,
            link_rate: None,
            uplink: None,
            work_factor: 1,
            isolate_compute: false,
            handshake_timeout: Duration::from_secs(5),
            max_connections: 32,
            idle_timeout: Duration::from_secs(DEFAULT_IDLE_SECS),
            encrypt: false,
            reference: Arc::new(Reference::default()),
        }
    }

    pub fn capabilities(&self) -> Capabilities {
        Capabilities {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            threads: self.threads as u32,
            memory_limit: self.memory_limit,
            kernel: kernel::KERNEL.into(),
            emulated: self.slowdown != 1.0
                || self.link_rate.is_some()
                || self.uplink.is_some()
                || self.work_factor != 1
                || self.speed_change.is_some(),
            ciphers: dls_protocol::seal::fast_ciphers(),
            // Given by the daemon to each connection (`server.rs`).
            session: 0,
        }
    }

    /// Frames may be as large as the format allows once the master is
    /// authenticated: every payload is checked against the memory limit
    /// (`admit`) before it is allocated, which gives the master a clearer
    /// error than a frame limit would.
    pub(crate) fn frame_cap(&self) -> u64 {
        dls_protocol::frame::ABSOLUTE_MAX_FRAME
    }
}

/// A change of emulated speed partway through each job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeedChange {
    /// Products of the job computed at the first speed.
    pub after: u64,
    /// The slowdown is multiplied by this from then on.
    pub factor: f64,
}

impl SpeedChange {
    /// `AFTER:FACTOR`, e.g. `100:3`.
    pub fn parse(s: &str) -> Result<SpeedChange, String> {
        let bad = || format!("--speed-change wants AFTER:FACTOR (products, then a positive factor), got {s:?}");
        let (a, f) = s.split_once(':').ok_or_else(bad)?;
        let after = a.trim().parse().map_err(|_| bad())?;
        let factor: f64 = f.trim().parse().map_err(|_| bad())?;
        if !(factor.is_finite() && factor > 0.0) {
            return Err(bad());
        }
        Ok(SpeedChange { after, factor })
    }

    /// The emulated extra time, in units of one product's reference time,
    /// for `k` products of a job that has computed `done` before them,
    /// at base slowdown `slowdown`.
    pub(crate) fn wait_units(change: Option<SpeedChange>, slowdown: f64, done: u64, k: u64) -> f64 {
        let (before, after, factor) = match change {
            Some(c) => {
                let before = c.after.saturating_sub(done).min(k);
                (before, k - before, c.factor)
            }
            None => (k, 0, 1.0),
        };
        ((slowdown - 1.0) * before as f64 + (slowdown * factor - 1.0) * after as f64).max(0.0)
    }
}

/// Emulation of a slower processor: after computing `count` products of
/// a form, wait `(slowdown − 1) · count · t(form)` (with a speed change, the
/// products past it count `slowdown · factor − 1`), where t(form) is this
/// machine's time for one product measured once, unloaded
/// (`kernel::seconds_per_product`). Tying the wait to a reference rather
/// than to the time just measured keeps the emulated speed steady when
/// other processes share the cores: on a busy machine a measured time, and
/// a wait proportional to it, would swing `slowdown`-fold.
#[derive(Default, Debug)]
pub struct Reference {
    per_product: std::sync::Mutex<HashMap<Form, f64>>,
}

impl Reference {
    /// This machine's time for one product of `form`, measured at the
    /// first call and the same ever after.
    pub fn seconds_per_product(&self, kernel: &kernel::Kernel, form: &Form) -> f64 {
        if let Some(&t) = self.per_product.lock().ok().and_then(|m| m.get(form).copied()).as_ref() {
            return t;
        }
        let t = kernel::seconds_per_product(kernel, form);
        if let Ok(mut m) = self.per_product.lock() {
            m.insert(*form, t);
        }
        t
    }

    /// This machine's time for one flop of `dtype`: from the largest
    /// square product of that type measured so far (the one a test bed
    /// measured before starting its daemons), else from one of 256 measured
    /// now. Panels of one large product come in many shapes; each is
    /// emulated from its flops rather than measured on its own.
    pub fn seconds_per_flop(&self, kernel: &kernel::Kernel, dtype: dls_protocol::DType) -> f64 {
        let known = self.per_product.lock().ok().and_then(|m| {
            m.iter()
                .filter(|(f, _)| f.shape.is_square() && f.dtype == dtype && !f.shared_b)
                .max_by_key(|(f, _)| f.shape.n)
                .map(|(f, &t)| t / f.shape.flops())
        });
        known.unwrap_or_else(|| {
            let form = Form {
                dtype,
                ..Form::square(256)
            };
            self.seconds_per_product(kernel, &form) / form.shape.flops()
        })
    }
}

/// A master's connection, as a session holds it.
pub(crate) type WorkerConn = Connection<Throttled<TcpStream>, ToWorker, FromWorker>;
