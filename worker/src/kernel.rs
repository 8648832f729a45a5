//! The matrix kernel: batches of C = A·B on row-major matrices of any
//! shape (A n×k, B k×m), in float32 or float64, with faer's GEMM; each
//! product has its own B, or one B serves them all.

mod spare;

pub use dls_common::matrix::{fill_random, fill_random_values, naive, naive_dims, Dims};
use dls_protocol::{Form, Values};
use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;
use std::time::Instant;

/// Name advertised in the worker's capabilities.
pub const KERNEL: &str = "faer 0.24 gemm (float32, float64)";

/// Below this many multiply-adds (256³) a product is too small to split
/// across threads: the batch is split by products instead.
const SPLIT_PRODUCTS_BELOW: usize = 256 * 256 * 256;

/// A type the kernel computes in: float32 or float64.
pub trait Elem: faer::traits::RealField + Copy + Send + Sync + Default {}

impl Elem for f32 {}
impl Elem for f64 {}

/// The B operands of a batch: one per product, or one for all.
#[derive(Clone, Copy)]
pub enum Bs<'a, T> {
    Each(&'a [T]),
    Shared(&'a [T]),
}

fn gemm<T: Elem>(c: &mut [T], a: &[T], b: &[T], d: Dims, parts: usize) {
    gemm_into(c, Accum::Replace, a, b, d, parts)
}

/// One product, its C cut into `parts` blocks computed at once on the
/// current pool (faer on each block alone).
/// Rows of C a slowed worker's extra rounds of a panel go into at once.
const SCRATCH_ROWS: usize = 128;

fn gemm_into<T: Elem>(c: &mut [T], accum: Accum, a: &[T], b: &[T], d: Dims, parts: usize) {
    let a = MatRef::from_row_major_slice(a, d.n, d.k);
    let b = MatRef::from_row_major_slice(b, d.k, d.m);
    let c = MatMut::from_row_major_slice_mut(c, d.n, d.m);
    split(c, accum, a, b, parts);
}

/// C's rows (or columns, when it is wider than tall) halved, and each half
/// computed by half the threads. faer's own parallel product gave one
/// product of 64×1024·1024×64 less on two threads than on one (0.4×).
fn split<T: Elem>(c: MatMut<'_, T>, accum: Accum, a: MatRef<'_, T>, b: MatRef<'_, T>, parts: usize) {
    let (rows, cols) = (c.nrows(), c.ncols());
    if parts <= 1 || rows.max(cols) < 2 * SPLIT_STEP {
        matmul(c, accum, a, b, T::one_impl(), Par::Seq);
        return;
    }
    let half = parts / 2;
    let cut = |len: usize| (len * half / parts).div_ceil(SPLIT_STEP) * SPLIT_STEP;
    if rows >= cols {
        let (c0, c1) = c.split_at_row_mut(cut(rows));
        let (a0, a1) = a.split_at_row(cut(rows));
        rayon::join(
            || split(c0, accum, a0, b, half),
            || split(c1, accum, a1, b, parts - half),
        );
    } else {
        let (c0, c1) = c.split_at_col_mut(cut(cols));
        let (b0, b1) = b.split_at_col(cut(cols));
        rayon::join(
            || split(c0, accum, a, b0, half),
            || split(c1, accum, a, b1, parts - half),
        );
    }
}

/// Blocks of C are cut at multiples of this many rows or columns (whole
/// register tiles of faer's micro-kernels).
const SPLIT_STEP: usize = 16;

/// The kernel with its own thread pool of `threads` threads (the pool is
/// made once; spawning threads per batch costs more than small products).
pub struct Kernel {
    pool: rayon::ThreadPool,
    threads: usize,
    isolated: bool,
    spare: spare::Spare,
}

/// Bytes of spare buffers a kernel keeps unless told otherwise
/// ([`Kernel::spare_bytes`]).
const SPARE_BYTES: u64 = 256 << 20;

impl Kernel {
    pub fn new(threads: usize) -> Result<Kernel, String> {
        let threads = threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("dls-kernel-{i}"))
            .build()
            .map_err(|e| format!("cannot start {threads} kernel threads: {e}"))?;
        Ok(Kernel {
            pool,
            threads,
            isolated: false,
            spare: spare::Spare::new(SPARE_BYTES),
        })
    }

    /// Keep at most `bytes` of spare buffers (see [`Kernel::recycle`]).
    pub fn spare_bytes(mut self, bytes: u64) -> Kernel {
        self.spare = spare::Spare::new(bytes);
        self
    }

    /// A buffer no longer needed (a computed chunk's inputs, results
    /// written): kept for a later chunk, already mapped, when it fits what
    /// is kept.
    pub fn recycle(&self, values: Values) {
        self.spare.keep(values)
    }

    /// A kept buffer of `len` values of `dtype`, holding whatever it held:
    /// for a chunk arriving in pieces, which write every value.
    pub fn spare(&self, dtype: dls_protocol::DType, len: usize) -> Option<Values> {
        self.spare.take(dtype, len)
    }

    /// Compute only on the pool's threads (named `dls-kernel-N`), also with
    /// one thread, so that a CPU quota on them caps computing alone and not
    /// the daemon's networking (`scripts/testbed.sh`). Off by default: with
    /// one thread the hand-off to the pool makes batches of 64×64 products
    /// 35–60% slower, of 256×256 10% (`cargo bench -p dls-worker --bench
    /// kernel`, `1-thread-isolated`).
    pub fn isolated(mut self) -> Kernel {
        self.isolated = true;
        self
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// `k` square float64 products of size `n`. `ab` holds A_1..A_k then
    /// B_1..B_k (2·k·n² values); the result holds C_1..C_k (k·n² values).
    pub fn multiply_batch(&self, ab: &[f64], n: usize, k: usize) -> Vec<f64> {
        let mut c = vec![0.0; k * n * n];
        let (a, b) = ab.split_at(k * n * n);
        self.multiply(a, Bs::Each(b), Dims::square(n), &mut c, 1);
        c
    }

    /// The products a chunk of `form` carries: `inputs` holds A_1..A_count
    /// then, unless B is shared, B_1..B_count; `shared_b` is the job's B
    /// when it is. Each product is computed `repeat` times over (see
    /// [`Kernel::multiply`]). Fails, saying why, when the lengths or types
    /// disagree with the form.
    pub fn multiply_form(
        &self,
        form: &Form,
        count: usize,
        inputs: &Values,
        shared_b: Option<&Values>,
        repeat: u32,
    ) -> Result<Values, String> {
        self.multiply_form_in(form, count, inputs, shared_b, repeat, true)
    }

    /// [`Kernel::multiply_form`], the results in a spare buffer if `spare`
    /// and one is kept, else in a fresh one.
    fn multiply_form_in(
        &self,
        form: &Form,
        count: usize,
        inputs: &Values,
        shared_b: Option<&Values>,
        repeat: u32,
        spare: bool,
    ) -> Result<Values, String> {
        let d = Dims::of(form);
        let a_len = count * d.n * d.k;
        if inputs.len() as u64 != form.in_len(count as u32) || inputs.dtype() != form.dtype {
            return Err(format!(
                "{} {} values for {count} products of {form}",
                inputs.len(),
                inputs.dtype()
            ));
        }
        let len = count * d.n * d.m;
        let kept = if spare { self.spare.take(form.dtype, len) } else { None };
        let mut c = match kept {
            Some(c) => c,
            None => Values::try_zeros(form.dtype, len)
                .ok_or_else(|| format!("no memory for the results of {count} products of {form}"))?,
        };
        match (inputs, shared_b, &mut c) {
            (Values::F32(v), None, Values::F32(c)) if !form.shared_b => {
                self.multiply(&v[..a_len], Bs::Each(&v[a_len..]), d, c, repeat)
            }
            (Values::F64(v), None, Values::F64(c)) if !form.shared_b => {
                self.multiply(&v[..a_len], Bs::Each(&v[a_len..]), d, c, repeat)
            }
            (Values::F32(v), Some(Values::F32(b)), Values::F32(c)) if form.shared_b && b.len() == d.k * d.m => {
                self.multiply(v, Bs::Shared(b), d, c, repeat)
            }
            (Values::F64(v), Some(Values::F64(b)), Values::F64(c)) if form.shared_b && b.len() == d.k * d.m => {
                self.multiply(v, Bs::Shared(b), d, c, repeat)
            }
            _ => return Err(format!("the shared B does not match {form}")),
        }
        Ok(c)
    }

    /// One outer-product step of a large product: `acc += A·B` for a
    /// panel of `form` (`inputs` holds A, n×k, then B, k×m; `acc` is the
    /// piece's C, n×m), or `acc = A·B` for a piece's `first` panel (what
    /// `acc` held is not read: its fresh pages are written once, not read
    /// and then copied), computed `repeat` times over (the last time
    /// counts). Fails, saying why, when the lengths or types disagree.
    pub fn add_panel(
        &self,
        form: &Form,
        inputs: &Values,
        acc: &mut Values,
        first: bool,
        repeat: u32,
    ) -> Result<(), String> {
        let d = Dims::of(form);
        let (a_len, c_len) = (d.n * d.k, d.n * d.m);
        if form.shared_b || inputs.len() as u64 != form.in_len(1) || inputs.dtype() != form.dtype {
            return Err(format!(
                "{} {} values for a panel of {form}",
                inputs.len(),
                inputs.dtype()
            ));
        }
        if acc.len() != c_len || acc.dtype() != form.dtype {
            return Err(format!("a panel of {form} for a piece of {} values", acc.len()));
        }
        let accum = if first { Accum::Replace } else { Accum::Add };
        fn add<T: Elem>(k: &Kernel, v: &[T], a_len: usize, c: &mut [T], d: Dims, accum: Accum, repeat: u32) {
            let (a, b) = v.split_at(a_len);
            let par = k.threads;
            let run = |c: &mut [T]| {
                // Extra rounds (a slower processor) go into a scratch of a
                // few rows, A taken a block of rows at a time: the same
                // products, without a piece-sized buffer to allocate and
                // fault in for every panel (a piece of 2048×1198 float64
                // is 19.6 MB; that took a quarter of a panel's time on a
                // worker slowed twice, which no slower processor pays).
                if repeat > 1 {
                    let rows = SCRATCH_ROWS.min(d.n).max(1);
                    let mut scratch = vec![T::default(); rows * d.m];
                    for _ in 1..repeat {
                        for (start, block) in (0..d.n).step_by(rows).map(|r| (r, rows.min(d.n - r))) {
                            let dims = Dims { n: block, ..d };
                            let a_rows = &a[start * d.k..(start + block) * d.k];
                            gemm_into(&mut scratch[..block * d.m], Accum::Replace, a_rows, b, dims, par);
                        }
                    }
                }
                gemm_into(c, accum, a, b, d, par);
            };
            if k.threads == 1 && !k.isolated {
                run(c)
            } else {
                k.pool.install(|| run(c))
            }
        }
        match (inputs, acc) {
            (Values::F32(v), Values::F32(c)) => add(self, v, a_len, c, d, accum, repeat.max(1)),
            (Values::F64(v), Values::F64(c)) => add(self, v, a_len, c, d, accum, repeat.max(1)),
            _ => return Err(format!("a panel of {form} for a piece of another type")),
        }
        Ok(())
    }

    /// The products of `a` (A_1.., n×k each) and `b` into `c` (C_1..,
    /// n×m each), computing every product `repeat` times over, one product
    /// at a time (so the work per product grows `repeat`-fold while the
    /// data in cache stays one product's): a slower processor for test
    /// beds (`dls-worker --work-factor`). The caller checks the lengths
    /// (the protocol does, from the frame header).
    pub fn multiply<T: Elem>(&self, a: &[T], b: Bs<'_, T>, d: Dims, c: &mut [T], repeat: u32) {
        let (a_len, b_len, c_len) = (d.n * d.k, d.k * d.m, d.n * d.m);
        if c_len == 0 {
            return;
        }
        let count = c.len() / c_len;
        debug_assert_eq!(a.len(), count * a_len);
        let repeat = repeat.max(1);
        if a_len == 0 {
            // k = 0: every C is an empty sum.
            c.iter_mut().for_each(|x| *x = T::default());
            return;
        }
        let pair = |i: usize| {
            let bi = match b {
                Bs::Each(b) => &b[i * b_len..(i + 1) * b_len],
                Bs::Shared(b) => b,
            };
            (&a[i * a_len..(i + 1) * a_len], bi)
        };
        let each = |i: usize, ci: &mut [T], par: usize| {
            let (ai, bi) = pair(i);
            for _ in 0..repeat {
                gemm(ci, ai, bi, d, par);
            }
        };
        let one_thread = |c: &mut [T]| c.chunks_mut(c_len).enumerate().for_each(|(i, ci)| each(i, ci, 1));
        if self.threads == 1 && !self.isolated {
            // No hand-off to the pool: the caller's thread is the one thread.
            one_thread(c);
            return;
        }
        self.pool.install(|| {
            if self.threads == 1 {
                one_thread(c);
            } else if count >= self.threads && d.n * d.k * d.m < SPLIT_PRODUCTS_BELOW {
                // Many small products: one product per task.
                c.par_chunks_mut(c_len).enumerate().for_each(|(i, ci)| each(i, ci, 1));
            } else {
                let par = self.threads;
                c.chunks_mut(c_len).enumerate().for_each(|(i, ci)| each(i, ci, par));
            }
        });
    }
}

/// Random inputs (and a shared B when the form has one) for `count`
/// products of `form`: what probes and benchmarks compute on.
pub fn random_inputs(form: &Form, count: usize, seed: u64) -> Result<(Values, Option<Values>), String> {
    let make = |len: u64, seed: u64| {
        let mut v = Values::try_zeros(form.dtype, len as usize)
            .ok_or_else(|| format!("no memory for {len} values of {}", form.dtype))?;
        fill_random_values(&mut v, seed);
        Ok::<_, String>(v)
    };
    let inputs = make(form.in_len(count as u32), seed)?;
    let shared = match form.shared_b {
        true => Some(make(form.shape.b_len(), seed ^ 0xb)?),
        false => None,
    };
    Ok((inputs, shared))
}

/// Seconds to compute `count` products of `form` on fresh data, each
/// `repeat` times over, into a fresh result buffer: what a run's first
/// chunk pays, and a price every probe pays alike (a spare buffer taken by
/// some probes and not others would bend the fitted line). A run's later
/// chunks go into spare buffers ([`Kernel::recycle`]): at 64² a node alone
/// computes them up to 2.5× faster than its probe says (docs/worker.md);
/// on one machine with its master, the master's transfers take about that
/// much from a run's compute (docs/partitioning.md).
pub fn time_batch(kernel: &Kernel, form: &Form, count: usize, repeat: u32) -> Result<f64, String> {
    let (inputs, shared) = random_inputs(form, count, 0x5eed ^ form.shape.n as u64)?;
    let t = Instant::now();
    let c = kernel.multiply_form_in(form, count, &inputs, shared.as_ref(), repeat, false)?;
    let secs = t.elapsed().as_secs_f64();
    std::hint::black_box(c);
    Ok(secs)
}

/// This machine's time for one product of `form`, unloaded: after a
/// warm-up (the first products of a process pay for one-time set-up), the
/// best of three batches of about 2 ms at 20 GFLOP/s, each into the
/// buffer the one before used (as a run's chunks do).
pub fn seconds_per_product(kernel: &Kernel, form: &Form) -> f64 {
    // Buffers made and touched once: page faults and allocation are not the
    // kernel's speed (and would make the reference depend on the process's
    // allocation history).
    let count = (2e-3 / (form.shape.flops() / 20e9)).ceil().clamp(1.0, 256.0) as usize;
    let Ok((inputs, shared)) = random_inputs(form, count, 0x5eed ^ form.shape.n as u64) else {
        return 0.0;
    };
    let run = || {
        let t = Instant::now();
        let c = kernel.multiply_form(form, count, &inputs, shared.as_ref(), 1);
        let secs = t.elapsed().as_secs_f64();
        match std::hint::black_box(c) {
            Ok(c) => {
                kernel.recycle(c);
                secs
            }
            Err(_) => f64::INFINITY,
        }
    };
    run();
    let best = (0..3).map(|_| run()).fold(f64::INFINITY, f64::min) / count as f64;
    if best.is_finite() {
        best
    } else {
        0.0
    }
}

/// GFLOP/s of the kernel on products of `form` (2·n·k·m flops each): a
/// batch of 32 Mi multiply-adds' worth of products (1 to 64 of them: a
/// worker's chunk of small products, streamed through the caches),
/// repeated for at least ~0.2 s; best of 3. Each batch's results go into the buffer the one
/// before used, as a daemon's chunk's go into a spare one.
pub fn gflops(kernel: &Kernel, form: &Form) -> Result<f64, String> {
    let flops = form.shape.flops();
    let count = ((32.0 * 1024.0 * 1024.0 * 2.0 / flops) as usize).clamp(1, 64);
    let (inputs, shared) = random_inputs(form, count, 0x5eed ^ form.shape.n as u64)?;
    let run = |reps: usize| {
        let t = Instant::now();
        for _ in 0..reps {
            let c = kernel.multiply_form(form, count, &inputs, shared.as_ref(), 1)?;
            kernel.recycle(std::hint::black_box(c));
        }
        Ok::<_, String>(t.elapsed().as_secs_f64())
    };
    let once = run(1)?.max(1e-6);
    let reps = ((0.2 / once).ceil() as usize).clamp(1, 100_000);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        best = best.min(run(reps)?);
    }
    Ok(flops * (count * reps) as f64 / best / 1e9)
}

#[cfg(test)]
mod tests;
