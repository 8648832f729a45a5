//! The master's port: which transfers hold it now. The batch machine owns
//! it and every schedule asks it before starting a transfer, so that
//! rounds running at once still share one port and no more transfers
//! cross it than the port model allows: one at a time (one port), one
//! each way (two ports), or as many as a shared uplink's capacity holds
//! (`dls_lp::lane`), each worker's link carrying one transfer each way at
//! a time.

use dls_lp::tol::SHARE_EPS;
use dls_lp::{Ports, Worker};
use dls_protocol::ChunkId;

/// A transfer crossing the port.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Flight {
    worker: usize,
    chunk: ChunkId,
    send: bool,
    share: f64,
}

/// The master's port(s) and the transfers holding them, with the planned
/// costs that say what share of the port each transfer takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Port {
    ports: Ports,
    costs: Vec<Worker>,
    flights: Vec<Flight>,
}

impl Port {
    /// The port of a master with workers of planned `costs`.
    pub fn new(ports: Ports, costs: &[Worker]) -> Port {
        Port {
            ports,
            costs: costs.to_vec(),
            flights: Vec::new(),
        }
    }

    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// The costs that say what share each transfer takes from now on (the
    /// speeds a run measured: a transfer over a link slower than planned
    /// takes less of a shared uplink). Transfers crossing keep theirs.
    pub fn set_costs(&mut self, costs: &[Worker]) {
        self.costs = costs.to_vec();
    }

    /// The lane a transfer draws on: 0, or 1 for returns when sends and
    /// returns have a capacity each.
    fn lane(&self, send: bool) -> usize {
        usize::from(!send && !self.ports.one_lane())
    }

    /// The share of the port a transfer of `units` to (or from) `worker`
    /// takes.
    pub fn share(&self, worker: usize, send: bool, units: usize) -> f64 {
        self.costs
            .get(worker)
            .map_or(1.0, |w| self.ports.transfer(w, send, units as f64).share)
    }

    /// The share of the lane of sends (or returns) in use.
    pub fn used(&self, send: bool) -> f64 {
        let lane = self.lane(send);
        self.flights
            .iter()
            .filter(|f| self.lane(f.send) == lane)
            .map(|f| f.share)
            .sum()
    }

    /// Whether a send (or return) of `units` for `worker` may start now:
    /// its worker's link is free that way and the port has room for it
    /// ([`dls_lp::lane::admits`]: all of its share, or enough to start
    /// with behind a shared uplink).
    pub fn admits(&self, worker: usize, send: bool, units: usize) -> bool {
        let lane = self.lane(send);
        let busy = self
            .flights
            .iter()
            .any(|f| f.worker == worker && self.lane(f.send) == lane);
        !busy && dls_lp::lane::admits(self.used(send), self.share(worker, send, units))
    }

    /// Whether a send (or return) of `units` for `worker` may start now
    /// with all of its share and still leave room for `other` more (a
    /// transfer waited for).
    pub fn admits_beside(&self, worker: usize, send: bool, units: usize, other: f64) -> bool {
        self.admits(worker, send, units) && self.used(send) + self.share(worker, send, units) + other <= 1.0 + SHARE_EPS
    }

    /// A transfer of `units` starts: the caller asked [`Port::admits`].
    pub fn start(&mut self, worker: usize, chunk: ChunkId, send: bool, units: usize) {
        debug_assert!(self.admits(worker, send, units));
        let share = self.share(worker, send, units);
        self.flights.push(Flight {
            worker,
            chunk,
            send,
            share,
        });
    }

    /// The send (or return) of `chunk` for `worker` is over; false if it
    /// was not crossing.
    pub fn end(&mut self, worker: usize, chunk: ChunkId, send: bool) -> bool {
        let before = self.flights.len();
        self.flights
            .retain(|f| !(f.worker == worker && f.chunk == chunk && f.send == send));
        self.flights.len() < before
    }

    /// `worker` is gone: whatever transfers it held end.
    pub fn release(&mut self, worker: usize) {
        self.flights.retain(|f| f.worker != worker);
    }

    /// Whether no transfer holds the port.
    pub fn idle(&self) -> bool {
        self.flights.is_empty()
    }

    /// How many transfers cross now.
    pub fn in_flight(&self) -> usize {
        self.flights.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dls_lp::Uplink;

    fn star() -> Vec<Worker> {
        vec![
            Worker::new("a", 0.4, 1.0, 0.4),
            Worker::new("b", 0.2, 1.0, 0.2),
            Worker::new("c", 0.1, 1.0, 0.1),
        ]
    }

    #[test]
    fn one_port_carries_one_transfer_and_two_ports_one_each_way() {
        let mut one = Port::new(Ports::One, &star());
        assert!(one.admits(0, true, 5));
        one.start(0, ChunkId(1), true, 5);
        assert!(!one.admits(1, true, 5) && !one.admits(1, false, 5));
        assert!(one.end(0, ChunkId(1), true) && one.idle());
        let mut two = Port::new(Ports::Two, &star());
        two.start(0, ChunkId(1), true, 5);
        assert!(!two.admits(1, true, 5) && two.admits(1, false, 5));
        two.start(1, ChunkId(2), false, 5);
        assert!(!two.admits(2, false, 5));
        two.release(1);
        assert!(two.admits(2, false, 5) && two.in_flight() == 1);
    }

    #[test]
    fn a_shared_uplink_carries_what_its_capacity_holds() {
        // Uplink of 0.1 s a unit: a's link (0.4) takes a quarter of it,
        // b's (0.2) half, c's (0.1) all.
        let u = Uplink::new(0.1, 0.1, true).expect("valid");
        let mut port = Port::new(Ports::Shared(u), &star());
        assert!((port.share(0, true, 7) - 0.25).abs() < 1e-12);
        port.start(0, ChunkId(1), true, 7);
        assert!(!port.admits(0, true, 1), "a's own link is busy");
        assert!(port.admits(1, true, 1));
        port.start(1, ChunkId(2), true, 1);
        // c needs all of the uplink, but a quarter is free: it may start
        // (the three then share the uplink), not with all of its share.
        assert!(port.admits(2, true, 1) && !port.admits_beside(2, true, 1, 0.0));
        assert!(port.admits(2, false, 1), "returns have their own direction");
        assert!(port.admits_beside(0, false, 1, 0.5) && !port.admits_beside(0, false, 1, 0.8));
        port.start(2, ChunkId(3), true, 1);
        // Nothing is free for a fourth send: a, b and c hold 1.75.
        let mut more = star();
        more.push(Worker::new("d", 1.0, 1.0, 1.0));
        port.set_costs(&more);
        assert!(!port.admits(3, true, 1), "no room left");
        port.end(1, ChunkId(2), true);
        port.end(2, ChunkId(3), true);
        assert!(port.admits(3, true, 1) && !port.admits_beside(2, true, 1, 0.0));
        port.end(0, ChunkId(1), true);
        assert!(port.admits_beside(2, true, 1, 0.0));
        let half = Uplink { duplex: false, ..u };
        let mut port = Port::new(Ports::Shared(half), &star());
        port.start(1, ChunkId(1), true, 1);
        assert!(!port.admits(1, false, 1), "half duplex: one lane for both ways");
        assert!(port.admits(0, false, 1) && !port.admits_beside(2, false, 1, 0.0));
    }
}
