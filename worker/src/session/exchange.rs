//! A worker's part in the exchange of one large product's panels
//! (`ToWorker::Exchange`): parts (`Share`) come from the master or from
//! peers, in any order; each stage's panel is put together from them (A's
//! rows from the row parts, in the first band, else from the rows kept;
//! B's columns of the band) and, once whole, goes on as a panel the
//! master had sent whole (`panel.rs`). Parts the master asks to pass on
//! go to the relay (`relay.rs`), which writes them to the peers in order.

use super::{unexpected, Flow, Outbox, Session, Work};
use crate::relay::Forward;
use dls_protocol::{ChunkId, DType, Form, Frame, JobId, PeerAddr, Result, Shape, SharePart, Span, ToWorker, Values};
use std::collections::HashMap;
use tokio::sync::mpsc;

/// One job's exchange on this worker.
pub(super) struct Assembly {
    dtype: DType,
    rows: Span,
    /// Each band's columns (absolute) and its piece.
    bands: Vec<(Span, ChunkId)>,
    steps: Vec<u32>,
    peers: Vec<PeerAddr>,
    /// Per step: A's rows of the first band's panel, kept for the others.
    kept: Vec<Option<Values>>,
    /// Stages being put together.
    open: HashMap<u32, Panel>,
    /// Bytes counted in the session's `held` for the rows kept.
    kept_bytes: u64,
    /// The next stage to hand on: panels go on in stage order.
    next: u32,
}

/// A stage's panel being put together.
#[derive(Default)]
struct Panel {
    /// A's rows (`h × depth`, row-major) and the spans of them in.
    a: Option<Values>,
    rows_in: Vec<Span>,
    b: Option<Values>,
}

impl Assembly {
    fn stages(&self) -> u32 {
        (self.bands.len() * self.steps.len()) as u32
    }

    /// The stage's band and step, and its depth.
    fn at(&self, stage: u32) -> (usize, usize, u32) {
        let s = self.steps.len();
        let (band, step) = (stage as usize / s, stage as usize % s);
        (band, step, self.steps[step])
    }

    /// Place `part` (payload `values`) of `stage`.
    fn place(&mut self, stage: u32, part: SharePart, values: Values) -> std::result::Result<(), String> {
        if stage < self.next || stage >= self.stages() {
            return Err(format!(
                "stage {stage} of an exchange of {} stages, {} of them whole already",
                self.stages(),
                self.next
            ));
        }
        let (band, _, depth) = self.at(stage);
        let (h, cols) = (self.rows.len as usize, self.bands[band].0);
        let d = depth as usize;
        let len = match part {
            SharePart::Rows(r) | SharePart::Cols(r) => r.len as usize * d,
        };
        if values.len() != len || values.dtype() != self.dtype {
            return Err(format!(
                "a part of {} {} values where {len} {} were due",
                values.len(),
                values.dtype(),
                self.dtype
            ));
        }
        let panel = self.open.entry(stage).or_default();
        match part {
            SharePart::Rows(r) => {
                let inside = r.start >= self.rows.start && r.end() <= self.rows.end() && r.len > 0;
                let twice = panel.rows_in.iter().any(|q| q.start < r.end() && r.start < q.end());
                if band != 0 || !inside || twice {
                    return Err(format!(
                        "rows {}..{} at stage {stage}: not rows of this worker's first band still due",
                        r.start,
                        r.end()
                    ));
                }
                let a = match &mut panel.a {
                    Some(a) => a,
                    None => panel
                        .a
                        .insert(Values::try_zeros(self.dtype, h * d).ok_or("no memory for a panel's rows")?),
                };
                a.copy_in((r.start - self.rows.start) as usize * d, &values)?;
                panel.rows_in.push(r);
            }
            SharePart::Cols(c) => {
                if c != cols || panel.b.is_some() {
                    return Err(format!(
                        "columns {}..{} at stage {stage}: not this band's ({}..{}) still due",
                        c.start,
                        c.end(),
                        cols.start,
                        cols.end()
                    ));
                }
                panel.b = Some(values);
            }
        }
        Ok(())
    }

    /// The next stage's panel, its inputs (A's rows then B's columns), if
    /// it is whole: panels go on in stage order, so a later band's finds
    /// the rows its step's first band kept.
    fn next_whole(&mut self) -> std::result::Result<Option<(u32, Values)>, String> {
        let stage = self.next;
        let Some(panel) = self.open.get(&stage) else {
            return Ok(None);
        };
        let (band, step, _) = self.at(stage);
        let rows_in: u32 = panel.rows_in.iter().map(|r| r.len).sum();
        if (band == 0 && rows_in != self.rows.len) || panel.b.is_none() {
            return Ok(None);
        }
        let Panel { a, b, .. } = self.open.remove(&stage).unwrap_or_default();
        let b = b.unwrap_or_default();
        let a = match band {
            0 => {
                let a = a.unwrap_or_default();
                if self.bands.len() > 1 {
                    self.kept[step] = Some(a.clone());
                }
                a
            }
            // The last band takes the rows kept; the others copy them.
            last if last + 1 == self.bands.len() => self.kept[step].take().ok_or("rows not kept")?,
            _ => self.kept[step].clone().ok_or("rows not kept")?,
        };
        let mut inputs = Values::try_zeros(self.dtype, a.len() + b.len()).ok_or("no memory for a panel")?;
        inputs.copy_in(0, &a)?;
        inputs.copy_in(a.len(), &b)?;
        self.next += 1;
        Ok(Some((stage, inputs)))
    }
}

impl Session {
    /// The master's `Exchange`: this worker's rectangle, bands, steps and
    /// peers for the job. The rows kept count against the memory limit.
    pub(super) fn on_exchange(&mut self, msg: ToWorker) -> Result<Flow> {
        let ToWorker::Exchange {
            job,
            dtype,
            rows,
            cols,
            bands,
            steps,
            peers,
        } = msg
        else {
            return Err(unexpected(format!("{} taken for an exchange", msg.name())));
        };
        let width: u64 = bands.iter().map(|b| b.1 as u64).sum();
        let bad = self.exchanges.contains_key(&job)
            || bands.is_empty()
            || steps.is_empty()
            || rows.len == 0
            || width != cols.len as u64
            || bands.iter().any(|b| b.1 == 0)
            || steps.contains(&0);
        if bad {
            return Err(unexpected(format!(
                "an exchange for job {} that cannot be laid out (or a second one)",
                job.0
            )));
        }
        let depth: u64 = steps.iter().map(|&d| d as u64).sum();
        let kept_bytes = match bands.len() > 1 {
            true => depth * rows.len as u64 * dtype.size(),
            false => 0,
        };
        if self.held.saturating_add(kept_bytes) > self.cfg.memory_limit {
            return Err(dls_protocol::Error::Refused {
                code: dls_protocol::ErrorCode::MemoryLimit,
                message: format!(
                    "an exchange keeping {kept_bytes} bytes of A's rows; this worker holds {} of its {}-byte memory limit",
                    self.held, self.cfg.memory_limit
                ),
            });
        }
        self.held += kept_bytes;
        self.cancelled.remove(&job);
        let mut at = cols.start;
        let bands = (bands.into_iter())
            .map(|(piece, w)| {
                at += w;
                (Span { start: at - w, len: w }, piece)
            })
            .collect();
        let kept = vec![None; steps.len()];
        self.exchanges.insert(
            job,
            Assembly {
                dtype,
                rows,
                bands,
                steps,
                peers,
                kept,
                open: HashMap::new(),
                kept_bytes,
                next: 0,
            },
        );
        Ok(Flow::Continue)
    }

    /// A part, from the master (`forward` the peers to pass it on to) or a
    /// peer: passed on, placed, and its panel on to be added once whole.
    pub(super) fn on_share(
        &mut self,
        out: &mut Outbox,
        frame: Frame<ToWorker>,
        work: &mpsc::UnboundedSender<Work>,
    ) -> Result<Flow> {
        let ToWorker::Share {
            job,
            stage,
            part,
            dtype,
            len,
            forward,
        } = frame.msg
        else {
            return Err(unexpected(format!("{} taken for a part", frame.msg.name())));
        };
        if self.cancelled.contains(&job) {
            return Ok(Flow::Continue);
        }
        let Some(x) = self.exchanges.get(&job) else {
            return Err(unexpected(format!("a part of job {} before its exchange", job.0)));
        };
        let mut passes = Vec::with_capacity(forward.len());
        for &i in &forward {
            let Some(peer) = x.peers.get(i as usize) else {
                return Err(unexpected(format!(
                    "a part to pass on to peer {i} of {}",
                    x.peers.len()
                )));
            };
            let msg = ToWorker::Share {
                job,
                stage,
                part,
                dtype,
                len,
                forward: Vec::new(),
            };
            passes.push(Forward {
                job,
                peer: i,
                to: peer.clone(),
                msg,
                payload: frame.payload.clone(),
            });
        }
        for f in passes {
            self.relay(f);
        }
        let Some(x) = self.exchanges.get_mut(&job) else {
            return Err(unexpected(format!("a part of job {} before its exchange", job.0)));
        };
        x.place(stage, part, frame.payload)
            .map_err(|e| unexpected(format!("job {}: {e}", job.0)))?;
        loop {
            let Some(x) = self.exchanges.get_mut(&job) else {
                return Ok(Flow::Continue);
            };
            let whole = x.next_whole().map_err(|e| unexpected(format!("job {}: {e}", job.0)))?;
            let Some((stage, inputs)) = whole else {
                return Ok(Flow::Continue);
            };
            if let Flow::Stop = self.hand_on(out, work, job, stage, inputs)? {
                return Ok(Flow::Stop);
            }
        }
    }

    /// A whole panel of `stage` on to be added, as if sent whole.
    fn hand_on(
        &mut self,
        out: &mut Outbox,
        work: &mpsc::UnboundedSender<Work>,
        job: JobId,
        stage: u32,
        inputs: Values,
    ) -> Result<Flow> {
        let Some(x) = self.exchanges.get_mut(&job) else {
            return Ok(Flow::Continue);
        };
        let (band, step, d) = x.at(stage);
        let (cols, piece) = x.bands[band];
        let form = Form {
            shape: Shape {
                n: x.rows.len,
                k: d,
                m: cols.len,
            },
            dtype: x.dtype,
            shared_b: false,
        };
        let depth: u32 = x.steps.iter().sum();
        let last = step + 1 == x.steps.len();
        if last && band + 1 == x.bands.len() {
            // The last panel: the rows kept are no longer needed.
            self.held = self.held.saturating_sub(x.kept_bytes);
            x.kept_bytes = 0;
        }
        self.take_panel(out, work, (job, piece), form, depth, last, inputs)
    }

    /// Forget the job's exchange (cancelled): its rows kept and open
    /// stages.
    pub(super) fn drop_exchange(&mut self, job: JobId) {
        if let Some(x) = self.exchanges.remove(&job) {
            self.held = self.held.saturating_sub(x.kept_bytes);
        }
    }
}

#[cfg(test)]
mod tests;
