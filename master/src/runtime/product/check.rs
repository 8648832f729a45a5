//! Freivalds' test of each piece of C, worked out panel by panel as the
//! panels go out (A·(B·x) summed over them, off the async threads), so
//! that only one pass over the piece remains when it arrives and the
//! master never reads a piece's inputs twice (except for inputs with NaN
//! or infinite values, checked the long way).

use super::ProductJob;
use crate::runtime::check::{self, Expected, Partial};
use dls_common::matrix::Dims;
use dls_lp::rectangles::Rect;
use dls_protocol::Values;
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

/// A piece being sent: its probe and each panel's share of A·(B·x),
/// worked out or being worked out.
pub(crate) struct PieceCheck {
    x: Arc<Vec<f64>>,
    rect: Rect,
    depth: usize,
    /// The shares worked out so far, summed as each is (one row's worth,
    /// not one per panel: a piece may have hundreds).
    sum: Arc<Mutex<Partial>>,
    /// The shares still being worked out.
    pending: Vec<JoinHandle<()>>,
}

impl PieceCheck {
    pub fn new(rect: Rect, depth: usize, rng: &mut impl rand::Rng) -> PieceCheck {
        PieceCheck {
            x: Arc::new(check::probe(rect.width, rng)),
            rect,
            depth,
            sum: Arc::new(Mutex::new(Partial::zero(rect.height))),
            pending: Vec::new(),
        }
    }

    /// Values of the piece's C.
    pub fn len(&self) -> usize {
        self.rect.area()
    }

    /// A panel `kp` deep goes out: its share, worked out on a blocking
    /// thread and added to the sum (the panel let go once it is).
    pub fn add(&mut self, panel: Arc<Values>, kp: usize) {
        self.pending.retain(|h| !h.is_finished());
        let (x, rect, sum) = (self.x.clone(), self.rect, self.sum.clone());
        self.pending.push(tokio::task::spawn_blocking(move || {
            let a_len = rect.height * kp;
            let a = panel.to_f64(0..a_len);
            let b = panel.to_f64(a_len..panel.len());
            let d = Dims {
                n: rect.height,
                k: kp,
                m: rect.width,
            };
            let part = Partial::of_panel(&a, &b, d, &x);
            match sum.lock() {
                Ok(mut s) => s.add(&part),
                // A share lost to a panic elsewhere: the piece is then checked the long way.
                Err(p) => p.into_inner().clean = false,
            }
        }));
    }

    /// Whether `c` is the piece's C (given back): `Ok(Err(why))` when it
    /// is wrong, `Err(why)` when the inputs cannot be read again.
    pub async fn check(self, job: &ProductJob, c: Values) -> (Values, Result<Result<(), String>, String>) {
        for p in self.pending {
            if let Err(e) = p.await {
                return (c, Err(format!("internal error: checking a piece: {e}")));
            }
        }
        let sum = match Arc::try_unwrap(self.sum) {
            Ok(m) => m.into_inner().unwrap_or_else(|p| p.into_inner()),
            Err(shared) => shared
                .lock()
                .map(|s| s.clone())
                .unwrap_or_else(|p| p.into_inner().clone()),
        };
        let (rect, depth) = (self.rect, self.depth);
        let d = Dims {
            n: rect.height,
            k: depth,
            m: rect.width,
        };
        let x = Arc::unwrap_or_clone(self.x);
        let expected = sum.expected(d, x.clone(), job.dtype());
        let job = job.clone();
        let done = tokio::task::spawn_blocking(move || {
            let verdict = {
                let cf = c.to_f64(0..c.len());
                match expected {
                    Some(e) => Ok(e.check(&[], &[], &cf).map_err(|m| m.to_string())),
                    // The long way: the piece's rows of A and columns of B again.
                    None => match job.panel(&rect, 0..depth) {
                        Err(e) => Err(format!("reading the product's inputs: {e}")),
                        Ok(inputs) => {
                            let a_len = rect.height * depth;
                            let (a, b) = (inputs.to_f64(0..a_len), inputs.to_f64(a_len..inputs.len()));
                            let e = Expected::new(&a, &b, d, x, job.dtype());
                            Ok(e.check(&a, &b, &cf).map_err(|m| m.to_string()))
                        }
                    },
                }
            };
            (c, verdict)
        })
        .await;
        match done {
            Ok(r) => r,
            Err(e) => (Values::default(), Err(format!("internal error: checking a piece: {e}"))),
        }
    }
}
