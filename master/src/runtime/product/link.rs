//! What a link task does for one product: each panel read where A and B
//! lie (the next one read ahead while this one goes out, as the plan says
//! which comes next), its share of the piece's check set off, and the
//! message that carries it.

use super::check::PieceCheck;
use super::ProductJob;
use dls_lp::rectangles::Rect;
use dls_protocol::{ChunkId, Form, JobId, Shape, ToWorker, Values};
use std::collections::{HashMap, VecDeque};
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
/// the panel read ahead, and the last panels handed out, whose memory the
/// next panels take once it is let go.
#[derive(Default)]
pub(crate) struct ProductSide {
    pub pieces: HashMap<ChunkId, PieceCheck>,
    ahead: Option<Ahead>,
    handed: VecDeque<Arc<Values>>,
}

/// Panels handed out whose memory a link keeps for the next ones: as many
/// as it holds at once (one going out, one read ahead, two being checked).
/// Of those let go, one at most is kept (the next read takes it), and none
/// once no panel follows: the memory held beyond what is in flight is
/// one panel a link. A 4096² product from `.npy` files on four loopback
/// workers spent a fifth of the master's processor mapping and zeroing
/// fresh panels.
const KEEP: usize = 4;

impl ProductSide {
    /// The memory of a panel handed out and let go since, if any.
    fn spare(&mut self) -> Option<Values> {
        let free = self.handed.iter().position(|v| Arc::strong_count(v) == 1)?;
        self.handed.remove(free).and_then(|v| Arc::try_unwrap(v).ok())
    }

    /// Remember `values`, handed out, when another panel follows (`more`):
    /// its memory serves a later one. Panels let go beyond one are
    /// dropped, all of them when none follows.
    fn hand(&mut self, values: &Arc<Values>, more: bool) {
        let mut free = 0;
        self.handed.retain(|v| {
            if Arc::strong_count(v) > 1 {
                return true;
            }
            free += 1;
            more && free <= 1
        });
        if !more {
            self.handed.clear();
            return;
        }
        if self.handed.len() == KEEP {
            self.handed.pop_front();
        }
        self.handed.push_back(values.clone());
    }

    fn read(&mut self, job: &Arc<ProductJob>, rect: Rect, ks: Range<usize>) -> JoinHandle<std::io::Result<Values>> {
        let (job, spare) = (job.clone(), self.spare());
        tokio::task::spawn_blocking(move || job.panel_into(&rect, ks, spare))
    }
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
            _ => self.read(job, rect, ks.clone()),
        };
        let values = match pending.await {
            Ok(Ok(v)) => Arc::new(v),
            Ok(Err(e)) => return Err(format!("reading the product's inputs: {e}")),
            Err(e) => return Err(format!("internal error: reading a panel: {e}")),
        };
        self.hand(&values, then.is_some());
        if let Some((r, next)) = then {
            self.ahead = Some(Ahead {
                at: (r, next.clone()),
                read: self.read(job, r, next),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panel_handed_out_serves_again_only_once_let_go_and_little_is_kept() {
        let mut side = ProductSide::default();
        let first = Arc::new(Values::F64(vec![1.0; 8]));
        side.hand(&first, true);
        assert!(side.spare().is_none(), "still being sent");
        let ptr = first.as_bytes().as_ptr();
        drop(first);
        let again = side.spare().expect("let go");
        assert_eq!(again.as_bytes().as_ptr(), ptr, "the same memory");
        assert!(side.spare().is_none(), "taken once");
        // Several let go: one is kept.
        for i in 0..3 {
            side.hand(&Arc::new(Values::F64(vec![i as f64; 2])), true);
        }
        let kept: Vec<f64> = std::iter::from_fn(|| side.spare()).map(|v| v.get(0)).collect();
        assert_eq!(kept.len(), 2, "the one kept and the last handed");
        // Those in flight stay, at most KEEP of them.
        let flying: Vec<_> = (0..KEEP + 2)
            .map(|i| Arc::new(Values::F64(vec![i as f64; 2])))
            .collect();
        flying.iter().for_each(|v| side.hand(v, true));
        assert_eq!(side.handed.len(), KEEP);
        assert!(side.spare().is_none(), "all in flight");
        // No panel follows: nothing is kept.
        side.hand(&flying[0], false);
        assert!(side.handed.is_empty());
    }
}
