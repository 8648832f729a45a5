//! Scenarios (send and return orders) and the timeline of a schedule.

use crate::error::{Error, Result};
use crate::platform::{Platform, Worker};
use crate::tol::{IDLE_REL_EPS, LOAD_EPS};
pub use crate::uplink::Uplink;

/// The master's communication model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ports {
    /// The master takes part in one transfer at a time (the report's model).
    One,
    /// The master may send to one worker while receiving from another.
    Two,
    /// The master's transfers share one uplink (a switched network): as
    /// many at once as its capacity holds, each at its own link's speed
    /// or the uplink's, whichever is slower.
    Shared(Uplink),
}

/// What one transfer costs the master: how long it takes and the share of
/// the port's capacity (1: all of it) it holds meanwhile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transfer {
    pub secs: f64,
    pub share: f64,
}

impl Ports {
    /// The shared uplink transfers cross, if the master is behind one.
    pub fn uplink(self) -> Option<Uplink> {
        match self {
            Ports::Shared(u) => Some(u),
            Ports::One | Ports::Two => None,
        }
    }

    /// Whether this is the report's one port: one transfer at a time,
    /// sends and returns alike, whatever the network.
    pub fn is_one_port(self) -> bool {
        matches!(self, Ports::One)
    }

    /// Whether sends and returns draw on one capacity (one lane of
    /// transfers), rather than one each.
    pub fn one_lane(self) -> bool {
        match self {
            Ports::One => true,
            Ports::Two => false,
            Ports::Shared(u) => !u.duplex,
        }
    }

    /// The cost of sending (or returning) `units` to (from) `worker`: one
    /// port or two, its link's time and all of the port; behind a shared
    /// uplink, the slower of its link and the uplink, holding the part of
    /// the uplink its rate takes.
    pub fn transfer(self, worker: &Worker, send: bool, units: f64) -> Transfer {
        let (latency, link) = if send {
            (worker.latency.send, worker.c)
        } else {
            (worker.latency.ret, worker.d)
        };
        match self {
            Ports::One | Ports::Two => Transfer {
                secs: latency + link * units,
                share: 1.0,
            },
            Ports::Shared(u) => {
                let (per, share) = u.unit(link, send);
                Transfer {
                    secs: latency + per * units,
                    share,
                }
            }
        }
    }

    /// The model one-round plans are solved in, and the platform they are
    /// solved on: behind a shared uplink, the master serving one transfer
    /// at a time (one lane) or one each way (duplex), each at the slower
    /// of its link and the uplink, which is what a one-round plan of the
    /// report's orders asks of the port. The other models are their own.
    pub fn classical(self, platform: &Platform) -> (Platform, Ports) {
        match self {
            Ports::One | Ports::Two => (platform.clone(), self),
            Ports::Shared(u) => {
                let workers = platform
                    .workers()
                    .iter()
                    .map(|w| Worker {
                        c: u.unit(w.c, true).0,
                        d: u.unit(w.d, false).0,
                        ..w.clone()
                    })
                    .collect();
                let ports = if u.duplex { Ports::Two } else { Ports::One };
                // Raising costs to a valid uplink's keeps them valid.
                let projected = Platform::new(workers)
                    .map(|p| p.with_uplink(platform.uplink()))
                    .unwrap_or_else(|_| platform.clone());
                (projected, ports)
            }
        }
    }

    /// How the model is named to users: `1`, `2`, or the uplink's figures.
    pub fn describe(self) -> String {
        match self {
            Ports::One => "one port".into(),
            Ports::Two => "two ports".into(),
            Ports::Shared(u) => format!(
                "shared {} uplink ({:.3e} s a unit out, {:.3e} s back)",
                if u.duplex { "full-duplex" } else { "half-duplex" },
                u.send,
                u.ret
            ),
        }
    }
}

/// A send order σ1 and a return order σ2, as indices into the platform.
/// Both list the same workers; a worker absent from the scenario gets no load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    pub send_order: Vec<usize>,
    pub return_order: Vec<usize>,
}

impl Scenario {
    /// Same order for sends and returns.
    pub fn fifo(order: Vec<usize>) -> Self {
        Scenario {
            return_order: order.clone(),
            send_order: order,
        }
    }

    /// Returns in the reverse of the send order.
    pub fn lifo(order: Vec<usize>) -> Self {
        let mut rev = order.clone();
        rev.reverse();
        Scenario {
            send_order: order,
            return_order: rev,
        }
    }

    /// Check that both orders are permutations of one set of distinct workers
    /// of `platform`.
    pub fn validate(&self, platform: &Platform) -> Result<()> {
        let p = platform.len();
        let mut seen = vec![0u8; p];
        for &i in &self.send_order {
            if i >= p {
                return Err(Error::BadScenario(format!("worker index {i} out of range (p = {p})")));
            }
            if seen[i] != 0 {
                return Err(Error::BadScenario(format!("worker index {i} sent to twice")));
            }
            seen[i] = 1;
        }
        if self.return_order.len() != self.send_order.len() {
            return Err(Error::BadScenario("send and return orders differ in length".into()));
        }
        for &i in &self.return_order {
            if i >= p || seen[i] != 1 {
                return Err(Error::BadScenario(format!(
                    "return order lists worker index {i}, absent from the send order or listed twice"
                )));
            }
            seen[i] = 2;
        }
        Ok(())
    }

    /// The same scenario restricted to the workers for which `keep` holds.
    pub fn restricted(&self, keep: impl Fn(usize) -> bool) -> Scenario {
        Scenario {
            send_order: self.send_order.iter().copied().filter(|&i| keep(i)).collect(),
            return_order: self.return_order.iter().copied().filter(|&i| keep(i)).collect(),
        }
    }
}

/// What one worker does, in seconds from the start of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WorkerTimes {
    pub send_start: f64,
    pub send_end: f64,
    pub compute_end: f64,
    pub return_start: f64,
    pub return_end: f64,
    /// Time between the end of computing and the start of the return.
    pub idle: f64,
}

/// The as-soon-as-possible execution of loads under a scenario: sends back to
/// back from time 0 in send order; each return starts when the worker has
/// computed, the previous return is over and (one port) every send is over.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// Indexed like the platform; workers with no load keep all zeros.
    pub workers: Vec<WorkerTimes>,
    pub makespan: f64,
}

impl Timeline {
    /// Build the timeline of `loads` (indexed like the platform). Workers with
    /// a load of (nearly) zero take no part, wherever the scenario puts them.
    ///
    /// For fixed orders and loads this is the earliest possible finish, so a
    /// plan's makespan is measured here rather than taken from a solver.
    pub fn build(platform: &Platform, scenario: &Scenario, loads: &[f64], ports: Ports) -> Timeline {
        let wk = platform.workers();
        let mut times = vec![WorkerTimes::default(); wk.len()];
        let mut t = 0.0;
        for &i in &scenario.send_order {
            if loads[i] <= LOAD_EPS {
                continue;
            }
            let tm = &mut times[i];
            tm.send_start = t;
            t += loads[i] * wk[i].c;
            tm.send_end = t;
            tm.compute_end = t + loads[i] * wk[i].w;
        }
        let mut port_free = if ports.one_lane() { t } else { 0.0 };
        for &i in &scenario.return_order {
            if loads[i] <= LOAD_EPS {
                continue;
            }
            let tm = &mut times[i];
            tm.return_start = tm.compute_end.max(port_free);
            tm.idle = tm.return_start - tm.compute_end;
            tm.return_end = tm.return_start + loads[i] * wk[i].d;
            port_free = tm.return_end;
        }
        let makespan = times.iter().map(|t| t.return_end).fold(0.0, f64::max);
        Timeline {
            workers: times,
            makespan,
        }
    }

    /// How many workers with a load wait (more than noise) before returning.
    pub fn idle_workers(&self, loads: &[f64]) -> usize {
        let eps = IDLE_REL_EPS * self.makespan;
        self.workers
            .iter()
            .zip(loads)
            .filter(|(t, &l)| l > LOAD_EPS && t.idle > eps)
            .count()
    }
}

impl Platform {
    /// The port model measured: behind the uplink when there is one, the
    /// report's one port otherwise.
    pub fn measured_ports(&self) -> Ports {
        self.uplink.map_or(Ports::One, Ports::Shared)
    }

    /// The platform to plan and run with `ports`: under one lane (the
    /// report's one port), each worker's costs without the factors it
    /// measured under load, which only hold where its send and return
    /// cross; otherwise this platform.
    pub fn for_ports(&self, ports: Ports) -> Platform {
        let mut out = self.clone();
        if !ports.one_lane() {
            return out;
        }
        for w in &mut out.workers {
            if w.under_load.is_some() {
                [w.c, w.w, w.d] = w.alone();
                w.under_load = None;
            }
        }
        out
    }
}
