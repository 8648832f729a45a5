//! Schedules of one round: which chunk to send next and which worker to
//! grant the port for its results, from the events of that round. Every
//! planned round follows its plan's sequence ([`Sequenced`]); the
//! on-demand baselines ([`OnDemand`]) hand chunks out as workers ask. Both
//! know nothing of sockets or other rounds: the port belongs to the batch
//! machine (`machine.rs`), which hands it to a schedule asked for a
//! transfer: the schedule offers one only if the port admits it.

pub use crate::chunk::{Chunk, Event, Unexpected};
use crate::on_demand::OnDemand;
use crate::port::Port;
use crate::sequenced::Sequenced;
use dls_protocol::ChunkId;

/// A round's schedule: the plan's sequence ([`Sequenced`], every planned
/// round, one chunk a worker or many) or an on-demand baseline
/// ([`OnDemand`]). A schedule tracks its own chunks; the port is not its
/// to hold: the machine asks for the next send or return, the schedule
/// offers one the port admits and marks it as started, and the machine
/// starts it on the port.
pub enum Schedule {
    Planned(Sequenced),
    OnDemand(OnDemand),
}

macro_rules! each {
    ($s:expr, $x:ident => $e:expr) => {
        match $s {
            Schedule::Planned($x) => $e,
            Schedule::OnDemand($x) => $e,
        }
    };
}

impl Schedule {
    /// The chunk to send now through `port`, if any (the schedule marks
    /// it as sending; the caller starts it on the port).
    pub fn next_send(&mut self, port: &Port) -> Option<Chunk> {
        each!(self, s => s.next_send(port))
    }

    /// The (worker, chunk, products) to grant `port` for its results now,
    /// if any.
    pub fn next_return(&mut self, port: &Port) -> Option<(usize, ChunkId, usize)> {
        each!(self, s => s.next_return(port))
    }

    pub fn on_event(&mut self, ev: Event) -> Result<(), Unexpected> {
        each!(self, s => s.on_event(ev))
    }

    /// Every chunk returned or handed back.
    pub fn done(&self) -> bool {
        each!(self, s => s.done())
    }

    /// Give up on `worker`: the chunks it had not returned (and, when no
    /// worker is left to take them, the chunks nobody was given yet).
    pub fn lose(&mut self, worker: usize) -> Vec<Chunk> {
        each!(self, s => s.lose(worker))
    }

    /// Whether `worker` holds a chunk of this schedule not yet computed.
    pub fn awaiting_ready(&self, worker: usize) -> bool {
        each!(self, s => s.awaiting_ready(worker))
    }

    /// A chunk by id, with the worker it went to.
    pub fn chunk(&self, id: ChunkId) -> Option<Chunk> {
        each!(self, s => s.chunk(id))
    }

    /// The time (seconds from the start of the run) of what the schedule
    /// is told or asked next: the planned sequence decides by the clock.
    pub fn at(&mut self, now: f64) {
        if let Schedule::Planned(s) = self {
            s.at(now);
        }
    }

    /// What the machine has seen of `worker`'s pace: measured over planned
    /// time for sending, computing and returning.
    pub fn pace(&mut self, worker: usize, factors: [f64; 3]) {
        if let Schedule::Planned(s) = self {
            s.pace(worker, factors);
        }
    }

    /// When the schedule would decide differently with no event in
    /// between (so the machine should be asked again then), if ever.
    pub fn wake_at(&self, port: &Port) -> Option<f64> {
        match self {
            Schedule::Planned(s) => s.wake_at(port),
            Schedule::OnDemand(_) => None,
        }
    }
}
