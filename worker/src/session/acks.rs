//! A session's control line, seen from the session: the grants it reads
//! there (`server.rs` passes them in) and where its `Received`s go; and
//! the parts its peers pass on, on connections of their own.

use super::{Out, Outbox, Session};
use dls_protocol::{Frame, FromWorker, ToWorker};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Where a session's `Received` go when its master opened a control line
/// (`server.rs`): that line's writer; else (`None`, or the line gone) the
/// session's own connection, where they wait behind results being written.
pub(crate) type AckSlot = Arc<std::sync::Mutex<Option<mpsc::UnboundedSender<FromWorker>>>>;

/// A session's control line, once its master opens one: the grants read
/// on it, and where the acknowledgements go.
pub(crate) struct ControlLine {
    pub grants: mpsc::UnboundedReceiver<ToWorker>,
    pub acks: AckSlot,
    /// `Share`s read on peers' connections (`server.rs`).
    pub parts: mpsc::UnboundedReceiver<Frame<ToWorker>>,
}

impl Session {
    /// Tell the master a chunk (or a panel) is in: on the control line if
    /// it has one, else on the connection.
    pub(super) fn acknowledge(&self, out: &mut Outbox, msg: FromWorker) {
        let line = self.acks.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match line {
            Some(tx) => {
                if let Err(e) = tx.send(msg) {
                    out.push(Out::msg(e.0));
                }
            }
            None => out.push(Out::msg(msg)),
        }
    }
}
