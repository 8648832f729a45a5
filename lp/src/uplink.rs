//! The master's uplink behind a switched network, as measured.

use crate::error::{Error, Result};
use crate::tol::MAX_COST;

/// A master whose transfers share one uplink (a switched network): sending
/// one unit to any worker occupies `send` seconds of the uplink's send
/// capacity and returning one `ret` seconds of its receive capacity; with
/// `duplex`, sends and returns use the two directions at once, otherwise
/// they share one. Each worker's own link still takes `c` and `d` per unit,
/// concurrently with the other workers' links.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Uplink {
    pub send: f64,
    pub ret: f64,
    pub duplex: bool,
}

impl Uplink {
    /// An uplink with positive finite `send` and non-negative finite `ret`
    /// (seconds a unit).
    pub fn new(send: f64, ret: f64, duplex: bool) -> Result<Uplink> {
        for (field, value, ok) in [("uplink send", send, send > 0.0), ("uplink return", ret, ret >= 0.0)] {
            if !(ok && value.is_finite() && value <= MAX_COST) {
                return Err(Error::BadUplink { field, value });
            }
        }
        Ok(Uplink { send, ret, duplex })
    }

    /// The uplink's seconds a unit one way (`send`: out, else back).
    pub fn way(&self, send: bool) -> f64 {
        if send {
            self.send
        } else {
            self.ret
        }
    }

    /// The share of the uplink one way that a transfer taking `secs` a
    /// unit holds: the uplink's time over its own (1: all of it).
    pub fn share_of(&self, secs: f64, send: bool) -> f64 {
        if secs > 0.0 {
            self.way(send) / secs
        } else {
            0.0
        }
    }

    /// The seconds a unit a transfer holding `share` of the uplink takes
    /// (the inverse of [`Uplink::share_of`]: a pace).
    pub fn secs_at(&self, share: f64, send: bool) -> f64 {
        self.way(send) / share
    }

    /// What one unit over a worker's link (`link` seconds a unit) costs
    /// behind the uplink, one way: the slower of the link and the uplink,
    /// and the share of the uplink it holds meanwhile. Every transfer's
    /// cost and share behind an uplink comes from here.
    pub fn unit(&self, link: f64, send: bool) -> (f64, f64) {
        let secs = link.max(self.way(send));
        (secs, self.share_of(secs, send))
    }
}
