//! What a link task does for one product: each panel read where A and B
//! lie (the next one read ahead while this one goes out, as the plan says
//! which comes next), its share of the piece's check set off, and the
//! message that carries it.

use super::check::PieceCheck;
use super::ProductJob;
use dls_lp::rectangles::Rect;
use dls_protocol::{ChunkId, Form, JobId, Shape, ToWorker, Values};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// A panel to send: A's rows and B's columns of `rect`, `ks` of k deep
/// (the piece's last when `last`); the worker may take `reading` to read
/// it; `then` is the panel the plan sends this worker next.
#[derive(Debug, Clone)]
pub(crate) struct PanelCmd {
    pub piece: ChunkId,
    pub rect: Rect,
    pub ks: Range<usize>,
    pub last: bool,
    pub reading: Duration,
    pub then: Option<(Rect, Range<usize>)>,
}

/// A panel being read ahead.
struct Ahead {
    at: (Rect, Range<usize>),
    read: JoinHandle<std::io::Result<Values>>,
}

/// A link task's state for one product: the checks of the pieces sent,
/// and the panel read ahead.
#[derive(Default)]
pub(crate) struct ProductSide {
    pub pieces: HashMap<ChunkId, PieceCheck>,
    ahead: Option<Ahead>,
}

fn read(job: &Arc<ProductJob>, rect: Rect, ks: Range<usize>) -> JoinHandle<std::io::Result<Values>> {
    let job = job.clone();
    tokio::task::spawn_blocking(move || job.panel(&rect, ks))
}

impl ProductSide {
    /// The message and values of `cmd`'s panel (read ahead if it was the
    /// one expected, else now), and whether it starts a piece; or why the
    /// product cannot go on.
    pub async fn panel(
        &mut self,
        job: &Arc<ProductJob>,
        id: JobId,
        cmd: PanelCmd,
        rng: &mut rand::rngs::StdRng,
    ) -> Result<(ToWorker, Arc<Values>, bool), String> {
        let PanelCmd {
            piece,
            rect,
            ks,
            last,
            then,
            ..
        } = cmd;
        let pending = match self.ahead.take() {
            Some(a) if a.at == (rect, ks.clone()) => a.read,
            _ => read(job, rect, ks.clone()),
        };
        let values = match pending.await {
            Ok(Ok(v)) => Arc::new(v),
            Ok(Err(e)) => return Err(format!("reading the product's inputs: {e}")),
            Err(e) => return Err(format!("internal error: reading a panel: {e}")),
        };
        if let Some((r, next)) = then {
            self.ahead = Some(Ahead {
                at: (r, next.clone()),
                read: read(job, r, next),
            });
        }
        let depth = job.dims().1;
        let new_piece = !self.pieces.contains_key(&piece);
        let check = self
            .pieces
            .entry(piece)
            .or_insert_with(|| PieceCheck::new(rect, depth, rng));
        check.add(values.clone(), ks.len());
        let form = Form {
            shape: Shape {
                n: rect.height as u32,
                k: ks.len() as u32,
                m: rect.width as u32,
            },
            dtype: job.dtype(),
            shared_b: false,
        };
        let msg = ToWorker::Panel {
            job: id,
            piece,
            form,
            depth: depth as u32,
            last,
        };
        Ok((msg, values, new_piece))
    }
}
