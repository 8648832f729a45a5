//! A chunk of a batch arriving: in one `Assign`, or in `Part`s that the
//! session puts together (the master sends a large chunk in pieces, so
//! that a grant for another chunk need not wait behind all of it).

use super::{unexpected, Key, Outbox, Session, Work};
use dls_protocol::{Error, ErrorCode, Form, FromWorker, Result, Values};
use std::sync::Arc;
use tokio::sync::mpsc;
use tracing::debug;

/// A chunk whose inputs are arriving in pieces.
pub(super) struct Partial {
    form: Form,
    count: u32,
    values: Values,
    filled: usize,
    /// The job's shared B, taken when the chunk was opened.
    shared_b: Option<Arc<Values>>,
}

impl Session {
    /// The chunk `key` of `count` products of `form` is opened: counted in
    /// flight and held; its job's shared B, if its products share one.
    fn open(&mut self, key: Key, form: Form, count: u32) -> Result<Option<Arc<Values>>> {
        let (job, chunk) = key;
        let shared_b = match self.shared_b.get(&job) {
            Some((f, b)) if form.shared_b && *f == form => Some(b.clone()),
            _ if form.shared_b => {
                return Err(unexpected(format!(
                    "chunk {} of job {} needs the job's shared B of {form}, which was not sent",
                    chunk.0, job.0
                )))
            }
            _ => None,
        };
        if !self.in_flight.insert(key) {
            return Err(unexpected(format!("chunk {} of job {} assigned twice", chunk.0, job.0)));
        }
        self.cancelled.remove(&job);
        self.held += form.held_bytes(count);
        Ok(shared_b)
    }

    /// A whole chunk: told received, and on to the computing thread.
    pub(super) fn on_assign(
        &mut self,
        out: &mut Outbox,
        work: &mpsc::UnboundedSender<Work>,
        key: Key,
        (form, count): (Form, u32),
        inputs: Values,
    ) -> Result<()> {
        let shared_b = self.open(key, form, count)?;
        self.received(out, work, key, (form, count), inputs, shared_b);
        Ok(())
    }

    fn received(
        &mut self,
        out: &mut Outbox,
        work: &mpsc::UnboundedSender<Work>,
        key: Key,
        (form, count): (Form, u32),
        inputs: Values,
        shared_b: Option<Arc<Values>>,
    ) {
        let (job, chunk) = key;
        self.acknowledge(out, FromWorker::Received { job, chunk });
        debug!(job = job.0, chunk = chunk.0, %form, count, "received");
        let _ = work.send(Work::Chunk {
            key,
            form,
            count,
            inputs,
            shared_b,
        });
    }

    /// A piece of a chunk: the first opens it, the last completes it.
    pub(super) fn on_part(
        &mut self,
        out: &mut Outbox,
        work: &mpsc::UnboundedSender<Work>,
        key: Key,
        (form, count): (Form, u32),
        piece: Values,
    ) -> Result<()> {
        let (job, chunk) = key;
        if !self.partial.contains_key(&key) {
            let shared_b = self.open(key, form, count)?;
            let total = form.in_len(count) as usize;
            // Every value is written by a piece before the chunk is computed.
            let spare = self.kernel.spare(form.dtype, total);
            let values = spare
                .or_else(|| Values::try_zeros(form.dtype, total))
                .ok_or_else(|| Error::Refused {
                    code: ErrorCode::MemoryLimit,
                    message: format!("cannot allocate chunk {} of {count} products of {form}", chunk.0),
                })?;
            let filled = 0;
            self.partial.insert(
                key,
                Partial {
                    form,
                    count,
                    values,
                    filled,
                    shared_b,
                },
            );
        }
        let p = self.partial.get_mut(&key).expect("opened above");
        if p.form != form || p.count != count || p.filled + piece.len() > p.values.len() {
            return Err(unexpected(format!(
                "a piece of chunk {} of job {} that does not fit it ({} values of {count} products of {form})",
                chunk.0,
                job.0,
                piece.len()
            )));
        }
        p.values.copy_in(p.filled, &piece).map_err(unexpected)?;
        p.filled += piece.len();
        // Copied in: its memory serves a later payload.
        self.kernel.recycle(piece);
        if p.filled < p.values.len() {
            return Ok(());
        }
        let p = self.partial.remove(&key).expect("present");
        self.received(out, work, key, (form, count), p.values, p.shared_b);
        Ok(())
    }

    /// The job is cancelled: chunks still arriving are let go.
    pub(super) fn drop_partial(&mut self, job: dls_protocol::JobId) {
        let keys: Vec<Key> = self.partial.keys().filter(|k| k.0 == job).copied().collect();
        for key in keys {
            if let Some(p) = self.partial.remove(&key) {
                self.held = self.held.saturating_sub(p.form.held_bytes(p.count));
                self.in_flight.remove(&key);
            }
        }
    }
}
