//! Costs that follow the products' size: a worker's transfers cost by the
//! byte, and its computing follows a speed function of the size, as in the
//! functional performance model (Lastovetsky and Reddy: speed is not
//! constant across sizes, because of caches). Fitted by `dls calibrate
//! --sizes` from calibrations at several sizes; a platform file that holds
//! it serves batches of other shapes of the same type.

use anyhow::{bail, Result};
use dls_lp::Worker;
use dls_protocol::Form;

/// One worker's costs as functions of the products.
#[derive(Debug, Clone, PartialEq)]
pub struct Scaling {
    /// Seconds per byte sent to the worker and returned by it (the slopes;
    /// per-message latencies stay in the worker's `latency`).
    pub send_per_byte: f64,
    pub return_per_byte: f64,
    /// Computing speed, flop/s, at measured sizes: (equivalent size n, speed)
    /// by increasing n; interpolated linearly in log n between them,
    /// constant beyond the first and the last.
    pub speed: Vec<(f64, f64)>,
}

/// The size of a product as one number: the n of the square product with
/// as many flops, (n·k·m)^⅓.
pub fn equivalent_size(form: &Form) -> f64 {
    (form.shape.n as f64 * form.shape.k as f64 * form.shape.m as f64).cbrt()
}

impl Scaling {
    /// Check the numbers (finite, positive, sizes increasing), naming `who`.
    pub fn validate(&self, who: &str) -> Result<()> {
        for (what, v) in [
            ("send_per_byte", self.send_per_byte),
            ("return_per_byte", self.return_per_byte),
        ] {
            if !(v.is_finite() && v > 0.0) {
                bail!("worker {who:?}: {what} = {v} must be finite and > 0");
            }
        }
        if self.speed.is_empty() {
            bail!("worker {who:?}: speed has no points");
        }
        for (i, &(n, s)) in self.speed.iter().enumerate() {
            if !(n.is_finite() && n >= 1.0 && s.is_finite() && s > 0.0) {
                bail!("worker {who:?}: speed point [{n}, {s}] needs a size ≥ 1 and a positive speed");
            }
            if i > 0 && n <= self.speed[i - 1].0 {
                bail!("worker {who:?}: speed points must be in increasing order of size");
            }
        }
        Ok(())
    }

    /// Flop/s at equivalent size `n`.
    pub fn speed_at(&self, n: f64) -> f64 {
        let pts = &self.speed;
        let Some(&(first_n, first_s)) = pts.first() else {
            return f64::NAN;
        };
        if n <= first_n {
            return first_s;
        }
        for w in pts.windows(2) {
            let ((n0, s0), (n1, s1)) = (w[0], w[1]);
            if n <= n1 {
                let t = (n.ln() - n0.ln()) / (n1.ln() - n0.ln());
                return s0 + (s1 - s0) * t;
            }
        }
        pts[pts.len() - 1].1
    }

    /// `base`'s costs for one product of `form`: bytes over the link's
    /// per-byte costs, flops over the speed at its size. Latencies are
    /// kept; the memory bound is left to the workers' own (see
    /// `session::align`).
    pub fn worker_for(&self, base: &Worker, form: &Form) -> Worker {
        let flops = form.shape.flops();
        Worker {
            c: form.in_bytes(1) as f64 * self.send_per_byte,
            w: flops / self.speed_at(equivalent_size(form)),
            d: form.out_bytes(1) as f64 * self.return_per_byte,
            max_load: None,
            // The scaling model's costs are those measured one at a time.
            under_load: None,
            ..base.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dls_protocol::{DType, Shape};

    fn scaling() -> Scaling {
        Scaling {
            send_per_byte: 1e-9,
            return_per_byte: 2e-9,
            speed: vec![(64.0, 1e9), (256.0, 3e9)],
        }
    }

    #[test]
    fn speed_is_interpolated_in_log_size_and_constant_outside() {
        let s = scaling();
        assert_eq!(s.speed_at(32.0), 1e9);
        assert_eq!(s.speed_at(64.0), 1e9);
        // 128 is halfway between 64 and 256 in log size.
        assert!((s.speed_at(128.0) - 2e9).abs() < 1e-3);
        assert_eq!(s.speed_at(256.0), 3e9);
        assert_eq!(s.speed_at(1000.0), 3e9);
    }

    #[test]
    fn costs_follow_bytes_and_flops() {
        let base = Worker::new("w", 1.0, 1.0, 1.0);
        let form = Form {
            shape: Shape { n: 128, k: 128, m: 128 },
            dtype: DType::F32,
            shared_b: false,
        };
        let w = scaling().worker_for(&base, &form);
        // A and B: 2·128²·4 bytes at 1 ns; C: 128²·4 bytes at 2 ns.
        assert!((w.c - 2.0 * 128.0 * 128.0 * 4.0 * 1e-9).abs() < 1e-15);
        assert!((w.d - 128.0 * 128.0 * 4.0 * 2e-9).abs() < 1e-15);
        assert!((w.w - 2.0 * 128f64.powi(3) / 2e9).abs() < 1e-12);
        // One shared B: only A is sent per product.
        let shared = Form { shared_b: true, ..form };
        assert!((scaling().worker_for(&base, &shared).c - 128.0 * 128.0 * 4.0 * 1e-9).abs() < 1e-15);
        // A thin product: n·k·m = 64³ has the speed of 64.
        let thin = Form {
            shape: Shape { n: 16, k: 1024, m: 16 },
            ..form
        };
        assert!((equivalent_size(&thin) - 64.0).abs() < 1e-9);
        assert!((scaling().worker_for(&base, &thin).w - thin.shape.flops() / 1e9).abs() < 1e-12);
    }

    #[test]
    fn bad_numbers_are_named() {
        let mut s = scaling();
        s.speed = vec![(64.0, 1e9), (32.0, 1e9)];
        assert!(s.validate("a").expect_err("order").to_string().contains("increasing"));
        s.speed = vec![];
        assert!(s.validate("a").is_err());
        let s = Scaling {
            send_per_byte: -1.0,
            ..scaling()
        };
        assert!(s
            .validate("a")
            .expect_err("negative")
            .to_string()
            .contains("send_per_byte"));
    }
}
