//! Pieces of one large product on the daemon: panels along k added into a
//! piece's C on the compute thread, C held for the grant after the last.

use super::{unexpected, Computed, Flow, Key, Outbox, Session, Work};
use crate::kernel;
use dls_protocol::{Form, Frame, FromWorker, Result, ToWorker, Values};
use std::collections::HashMap;
use tokio::sync::mpsc;
use tracing::debug;

impl Session {
    /// A panel arrived (admitted already): counted, acknowledged, and
    /// handed to the compute thread; its piece's C is counted with its
    /// first panel.
    pub(super) fn on_panel(
        &mut self,
        out: &mut Outbox,
        frame: Frame<ToWorker>,
        work: &mpsc::UnboundedSender<Work>,
    ) -> Result<Flow> {
        let ToWorker::Panel {
            job,
            piece,
            form,
            depth,
            last,
        } = frame.msg
        else {
            return Err(unexpected(format!("{} taken for a panel", frame.msg.name())));
        };
        self.take_panel(out, work, (job, piece), form, depth, last, frame.payload)
    }

    /// A panel whole (sent so, or put together from an exchange's parts):
    /// counted, acknowledged, and handed to the compute thread.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn take_panel(
        &mut self,
        out: &mut Outbox,
        work: &mpsc::UnboundedSender<Work>,
        key: Key,
        form: Form,
        depth: u32,
        last: bool,
        inputs: Values,
    ) -> Result<Flow> {
        let (job, piece) = key;
        let first = !self.pieces.contains_key(&key);
        if first {
            if !self.in_flight.insert(key) || form.shared_b {
                return Err(unexpected(format!(
                    "panel of piece {} of job {} after its results",
                    piece.0, job.0
                )));
            }
            self.cancelled.remove(&job);
            self.pieces.insert(key, (depth, form.out_bytes(1)));
            self.held += form.out_bytes(1);
        } else if self.pieces.get(&key).is_some_and(|&(d, _)| d != depth) {
            return Err(unexpected(format!("panels of piece {} disagree on its depth", piece.0)));
        }
        if last {
            // Later panels of this piece would start another.
            self.pieces.remove(&key);
        }
        self.held += form.in_bytes(1);
        self.acknowledge(out, FromWorker::Received { job, chunk: piece });
        debug!(job = job.0, piece = piece.0, %form, last, "panel received");
        let _ = work.send(Work::Panel {
            key,
            form,
            depth,
            first,
            last,
            inputs,
        });
        Ok(Flow::Continue)
    }

    /// The job is cancelled: the pieces of it being added up, and their C,
    /// are let go (on the compute thread too).
    pub(super) fn drop_pieces(&mut self, job: dls_protocol::JobId, work: &mpsc::UnboundedSender<Work>) {
        let keys: Vec<Key> = self.pieces.keys().filter(|k| k.0 == job).copied().collect();
        for key in keys {
            if let Some((_, bytes)) = self.pieces.remove(&key) {
                self.held = self.held.saturating_sub(bytes);
                self.in_flight.remove(&key);
            }
        }
        let _ = work.send(Work::Drop(job));
    }

    /// A panel was added: its inputs let go, the master told, and after
    /// the last the piece's C held for its grant.
    pub(super) fn on_panel_done(
        &mut self,
        out: &mut Outbox,
        key: Key,
        form: Form,
        c: std::result::Result<Option<(Form, Values)>, String>,
        secs: f64,
    ) -> Result<Flow> {
        self.held = self.held.saturating_sub(form.in_bytes(1));
        if self.cancelled.contains(&key.0) {
            // Its C was let go when the job was cancelled.
            return Ok(Flow::Continue);
        }
        let c = super::ready(out, key, "piece", c, secs)?;
        if let Some((form, c)) = c {
            self.hold(out, key, Computed { form, count: 1, c });
        }
        Ok(Flow::Continue)
    }
}

/// Add a panel into its piece's C (zero before the first; a later panel of
/// a piece dropped by a cancel is let go); after the last, the piece's C
/// and the form of its results (k the piece's whole depth).
#[allow(clippy::too_many_arguments)]
pub(super) fn add_panel(
    kernel: &kernel::Kernel,
    accs: &mut HashMap<Key, Values>,
    key: Key,
    form: Form,
    depth: u32,
    first: bool,
    last: bool,
    inputs: &Values,
    work_factor: u32,
) -> std::result::Result<Option<(Form, Values)>, String> {
    if first {
        let c = Values::try_zeros(form.dtype, form.shape.c_len() as usize)
            .ok_or_else(|| format!("no memory for a piece of {} values", form.shape.c_len()))?;
        accs.insert(key, c);
    }
    let Some(acc) = accs.get_mut(&key) else {
        return Ok(None);
    };
    kernel.add_panel(&form, inputs, acc, first, work_factor)?;
    if !last {
        return Ok(None);
    }
    let c = accs.remove(&key).unwrap_or_default();
    let mut whole = form;
    whole.shape.k = depth;
    Ok(Some((whole, c)))
}
