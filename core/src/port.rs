//! The master's port: which transfers hold it now. The batch machine owns
//! it and asks it before starting any transfer, so that rounds running at
//! once still share one port and no more transfers cross it than the port
//! model allows.

use dls_lp::Ports;
use dls_protocol::ChunkId;

/// The master's port(s): which transfer holds them now. The batch machine
/// owns it; every schedule asks it before starting a transfer, so two
/// rounds running at once still share one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Port {
    ports: Ports,
    sending: Option<(usize, ChunkId)>,
    returning: Option<(usize, ChunkId)>,
}

impl Port {
    pub fn new(ports: Ports) -> Port {
        Port {
            ports,
            sending: None,
            returning: None,
        }
    }

    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// Whether a send may start now.
    pub fn can_send(&self) -> bool {
        match self.ports {
            Ports::One => self.sending.is_none() && self.returning.is_none(),
            Ports::Two => self.sending.is_none(),
        }
    }

    /// Whether a return may start now.
    pub fn can_return(&self) -> bool {
        match self.ports {
            Ports::One => self.sending.is_none() && self.returning.is_none(),
            Ports::Two => self.returning.is_none(),
        }
    }

    pub fn start_send(&mut self, worker: usize, chunk: ChunkId) {
        debug_assert!(self.can_send());
        self.sending = Some((worker, chunk));
    }

    pub fn start_return(&mut self, worker: usize, chunk: ChunkId) {
        debug_assert!(self.can_return());
        self.returning = Some((worker, chunk));
    }

    /// The send of `chunk` to `worker` is over; false if it was not the one
    /// holding the port.
    pub fn end_send(&mut self, worker: usize, chunk: ChunkId) -> bool {
        let ours = self.sending == Some((worker, chunk));
        if ours {
            self.sending = None;
        }
        ours
    }

    pub fn end_return(&mut self, worker: usize, chunk: ChunkId) -> bool {
        let ours = self.returning == Some((worker, chunk));
        if ours {
            self.returning = None;
        }
        ours
    }

    /// `worker` is gone: whatever transfer it held ends.
    pub fn release(&mut self, worker: usize) {
        if self.sending.is_some_and(|s| s.0 == worker) {
            self.sending = None;
        }
        if self.returning.is_some_and(|r| r.0 == worker) {
            self.returning = None;
        }
    }

    /// Whether no transfer holds the port.
    pub fn idle(&self) -> bool {
        self.sending.is_none() && self.returning.is_none()
    }
}
