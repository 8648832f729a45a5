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
}
