//! The matrices of a batch and the master's own check of its results.

use crate::runtime::check;
use crate::runtime::data::{self, Slab, Source};
use crate::runtime::random::RandomValues;
use anyhow::{bail, Result};
use dls_common::matrix::{self, Dims};
use dls_protocol::{DType, Form, Values};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The matrices of a batch: `count` products of `form`, row-major, A_1..
/// (n×k each) in `a`, B_1.. (k×m each) in `b`, or the one B every product
/// shares when `form.shared_b`; each in memory or in a file read as it is
/// sent.
#[derive(Debug, Clone)]
pub struct Batch {
    pub form: Form,
    pub count: usize,
    pub a: Source,
    pub b: Source,
}

/// The inputs of one chunk, read once: each run of consecutive products is
/// one slab of A's (and one of B's unless B is shared).
#[derive(Debug)]
pub struct ChunkInputs {
    form: Form,
    runs: Vec<std::ops::Range<usize>>,
    a: Vec<Slab>,
    b: Vec<Slab>,
}

impl ChunkInputs {
    /// What the chunk carries, as the wire wants it: the A's, then the B's
    /// unless B is shared.
    pub fn parts(&self) -> Vec<Cow<'_, [u8]>> {
        let b: &[Slab] = if self.form.shared_b { &[] } else { &self.b };
        self.a.iter().chain(b).map(Slab::le_bytes).collect()
    }

    /// The slab holding the chunk's `j`-th product, and the product's place in it.
    fn locate(&self, j: usize) -> (usize, usize) {
        let mut left = j;
        for (r, run) in self.runs.iter().enumerate() {
            if left < run.len() {
                return (r, left);
            }
            left -= run.len();
        }
        (self.runs.len().saturating_sub(1), left)
    }

    /// A and B of the chunk's `j`-th product, widened to f64.
    pub fn a_of(&self, j: usize) -> Cow<'_, [f64]> {
        let (r, at) = self.locate(j);
        let len = self.form.shape.a_len() as usize;
        self.a[r].to_f64(at * len..(at + 1) * len)
    }

    pub fn b_of(&self, j: usize) -> Cow<'_, [f64]> {
        let len = self.form.shape.b_len() as usize;
        if self.form.shared_b {
            return self.b[0].to_f64(0..len);
        }
        let (r, at) = self.locate(j);
        self.b[r].to_f64(at * len..(at + 1) * len)
    }
}

/// Memory this machine can still give a process (MemAvailable in
/// /proc/meminfo), when it says.
pub fn available_memory() -> Option<u64> {
    dls_common::meminfo_bytes("MemAvailable")
}

/// Bytes the master holds for `count` products of `form` (A, B and C),
/// or `None` when that overflows.
pub fn master_bytes(count: usize, form: &Form) -> Option<u64> {
    inputs_bytes(count, form)?.checked_add(form.out_bytes(1).checked_mul(count as u64)?)
}

/// Bytes of the inputs (A and B) of `count` products of `form`, or `None`
/// when that overflows.
pub fn inputs_bytes(count: usize, form: &Form) -> Option<u64> {
    let per = form.in_bytes(1);
    let shared = if form.shared_b { form.b_bytes() } else { 0 };
    if per == u64::MAX || shared == u64::MAX {
        return None;
    }
    (count as u64).checked_mul(per)?.checked_add(shared)
}

/// Refuse, naming `what`, a batch the master could not hold: sizes that
/// overflow, or more memory than `available` (bytes; unknown means no
/// limit). With `with_c`, C is held too (no output file to stream it to).
pub fn check_fits(count: usize, form: &Form, with_c: bool, available: Option<u64>, what: &str) -> Result<()> {
    let held = if with_c {
        master_bytes(count, form)
    } else {
        inputs_bytes(count, form)
    };
    let Some(bytes) = held else {
        bail!("{what}: {count} products of {form} are more values than can be counted");
    };
    let held = if with_c { "A, B and C" } else { "A and B" };
    let (products, verb) = match count {
        1 => ("one product".to_string(), "needs"),
        _ => (format!("{count} products"), "need"),
    };
    if let Some(avail) = available {
        if bytes > avail {
            bail!(
                "{what}: {products} of {form} {verb} {} in the master ({held}), more than the {} this machine has available",
                human_bytes(bytes),
                human_bytes(avail)
            );
        }
    }
    Ok(())
}

/// Bytes for people: "2.4 MB", "1.3 GB".
pub fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1_000_000_000 => format!("{:.1} GB", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b => format!("{:.1} kB", b as f64 / 1e3),
    }
}

impl Batch {
    /// A batch of `count` products of `form` from its matrices, refused,
    /// naming what disagrees, when their type or length does not fit.
    pub fn new(form: Form, count: usize, a: Values, b: Values) -> Result<Batch> {
        Batch::from_sources(form, count, Source::Memory(Arc::new(a)), Source::Memory(Arc::new(b)))
    }

    /// A batch whose matrices are wherever `a` and `b` say (memory, files).
    pub fn from_sources(form: Form, count: usize, a: Source, b: Source) -> Result<Batch> {
        let b_products = if form.shared_b { 1 } else { count as u64 };
        for (name, v, per, products) in [
            ("A", &a, form.shape.a_len(), count as u64),
            ("B", &b, form.shape.b_len(), b_products),
        ] {
            if v.dtype() != form.dtype {
                bail!("{name} holds {} values, not {}", v.dtype(), form.dtype);
            }
            if Some(v.len() as u64) != per.checked_mul(products) {
                bail!(
                    "{name} holds {} values, not the {products} × {per} of {count} products of {form}",
                    v.len()
                );
            }
        }
        Ok(Batch { form, count, a, b })
    }

    /// `count` square float64 products of size `n`, random in [-1, 1) from a seed.
    pub fn random(count: usize, n: usize, seed: u64) -> Batch {
        Batch::random_form(Form::square(n as u32), count, seed).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `count` products of `form`, random in [-1, 1) from a seed (float32
    /// values rounded from the same draws), made as they are read
    /// (`random.rs`): nothing is held. Refused only when the batch has
    /// more values than can be counted.
    pub fn random_form(form: Form, count: usize, seed: u64) -> Result<Batch> {
        let b_products = if form.shared_b { 1 } else { count as u64 };
        let too_many = || anyhow::anyhow!("{count} products of {form} are more values than can be counted");
        // Bytes of A, B and C are counted (the wire, the sinks, the
        // reports): they must fit a u64 even if none is held.
        master_bytes(count, &form).ok_or_else(too_many)?;
        let len = |per: u64, products: u64| usize::try_from(per * products).map_err(|_| too_many());
        let source = |len: usize, seed: u64| Source::External(Arc::new(RandomValues::new(form.dtype, len, seed)));
        let a = source(
            len(form.shape.a_len(), count as u64)?,
            seed.wrapping_mul(2).wrapping_add(1),
        );
        let b = source(
            len(form.shape.b_len(), b_products)?,
            seed.wrapping_mul(2).wrapping_add(2),
        );
        Batch::from_sources(form, count, a, b)
    }

    pub fn dims(&self) -> Dims {
        Dims::of(&self.form)
    }

    /// The products `runs` (sorted, disjoint ranges) of this batch, back to
    /// back: a batch of their count whose `i`-th product is the `i`-th of
    /// the runs (a shared B stays the one B).
    pub fn subset(&self, runs: &[std::ops::Range<usize>]) -> Batch {
        let (a_len, b_len) = (self.form.shape.a_len() as usize, self.form.shape.b_len() as usize);
        let a = data::Subset::new(self.a.clone(), a_len, runs.to_vec());
        let count = a.count();
        let b = match self.form.shared_b {
            true => self.b.clone(),
            false => Source::Subset(Arc::new(data::Subset::new(self.b.clone(), b_len, runs.to_vec()))),
        };
        Batch {
            form: self.form,
            count,
            a: Source::Subset(Arc::new(a)),
            b,
        }
    }

    /// The inputs of the products `products` (sorted): views of arrays in
    /// memory, or read from the files.
    pub fn read_chunk(&self, products: &[usize]) -> std::io::Result<ChunkInputs> {
        let (a_len, b_len) = (self.form.shape.a_len() as usize, self.form.shape.b_len() as usize);
        let runs = data::runs(products);
        let a = runs
            .iter()
            .map(|r| self.a.read(r.start * a_len..r.end * a_len))
            .collect::<std::io::Result<Vec<_>>>()?;
        let b = match self.form.shared_b {
            true => vec![self.b.read(0..b_len)?],
            false => runs
                .iter()
                .map(|r| self.b.read(r.start * b_len..r.end * b_len))
                .collect::<std::io::Result<Vec<_>>>()?,
        };
        Ok(ChunkInputs {
            form: self.form,
            runs,
            a,
            b,
        })
    }

    /// A_i and B_i, widened to f64.
    pub fn a_of(&self, i: usize) -> std::io::Result<Vec<f64>> {
        Ok(self.read_chunk(&[i])?.a_of(0).into_owned())
    }

    pub fn b_of(&self, i: usize) -> std::io::Result<Vec<f64>> {
        Ok(self.read_chunk(&[i])?.b_of(0).into_owned())
    }

    /// Values of C for the whole batch.
    pub fn c_len(&self) -> usize {
        self.count * self.form.shape.c_len() as usize
    }

    /// A sink in memory for every product's C (zeros until stored), or an
    /// error naming the batch if this machine cannot allocate it.
    pub fn memory_sink(&self) -> anyhow::Result<data::MemorySink> {
        let c = Values::try_zeros(self.form.dtype, self.c_len())
            .ok_or_else(|| anyhow::anyhow!("no memory for the results of {} products of {}", self.count, self.form))?;
        Ok(data::MemorySink(c))
    }
}

/// C_i of a batch's results, widened to f64.
pub fn c_of<'a>(c: &'a Values, form: &Form, i: usize) -> Cow<'a, [f64]> {
    let len = form.shape.c_len() as usize;
    c.to_f64(i * len..(i + 1) * len)
}

/// The `count` products the master recomputes, chosen at random from
/// `seed`, in order.
pub fn picks(products: usize, count: usize, seed: u64) -> Vec<usize> {
    use rand::SeedableRng;
    let count = count.min(products);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut picks = rand::seq::index::sample(&mut rng, products, count).into_vec();
    picks.sort_unstable();
    picks
}

/// What the master's naive kernel says a product must be: C (`want`) and
/// |A|·|B| (`scale`, which bounds the rounding allowed), in float64.
#[derive(Debug)]
pub struct Reference {
    want: Vec<f64>,
    scale: Vec<f64>,
}

/// References worked out before a run ends hold at most this many bytes
/// (the others are worked out when their products are checked).
const AHEAD_BYTES: usize = 64 << 20;

/// Product `i`'s reference: the naive triple loop, not the workers'
/// kernel, an independent computation of the same product.
fn reference(batch: &Batch, i: usize) -> Result<Reference> {
    let (a, b) = (batch.a_of(i)?, batch.b_of(i)?);
    let abs = |v: &[f64]| {
        v.iter()
            .map(|x| if x.is_finite() { x.abs() } else { 0.0 })
            .collect::<Vec<_>>()
    };
    let d = batch.dims();
    Ok(Reference {
        want: matrix::naive_dims(&a, &b, d),
        scale: matrix::naive_dims(&abs(&a), &abs(&b), d),
    })
}

/// The references of the first of `picks` (within [`AHEAD_BYTES`]), worked
/// out while the run goes on: a product whose inputs cannot be read is
/// left to [`verify_with`], which reads them again and says why.
pub fn references(batch: &Batch, picks: &[usize]) -> BTreeMap<usize, Reference> {
    let each = 2 * 8 * batch.dims().n * batch.dims().m;
    let ahead = AHEAD_BYTES / each.max(1);
    picks
        .iter()
        .take(ahead)
        .filter_map(|&i| Some((i, reference(batch, i).ok()?)))
        .collect()
}

/// Recompute the products whose results were kept (`kept`: C of each, in
/// f64) and compare. The master recomputes them with the naive kernel, in
/// float64. Returns how many were checked and the largest absolute error;
/// fails when an error exceeds what rounding in the batch's type can
/// explain.
#[cfg(test)]
pub fn verify(batch: &Batch, kept: &BTreeMap<usize, Vec<f64>>) -> Result<(usize, f64)> {
    verify_with(batch, kept, BTreeMap::new())
}

/// [`verify`], with the references already worked out (`ahead`, from
/// [`references`]) taken as they are.
pub fn verify_with(
    batch: &Batch,
    kept: &BTreeMap<usize, Vec<f64>>,
    mut ahead: BTreeMap<usize, Reference>,
) -> Result<(usize, f64)> {
    let d = batch.dims();
    let mut worst = 0.0f64;
    let eps = 4.0 * (d.k as f64 + 2.0) * batch.form.dtype.epsilon();
    let limit = match batch.form.dtype {
        DType::F32 => f32::MAX as f64,
        DType::F64 => f64::MAX,
    };
    for (&i, c) in kept {
        let Reference { want, scale } = match ahead.remove(&i) {
            Some(r) => r,
            None => reference(batch, i)?,
        };
        if c.len() != want.len() {
            bail!("product {i}: {} values kept, {} expected", c.len(), want.len());
        }
        for (j, (&got, &want)) in c.iter().zip(&want).enumerate() {
            // Summation order may differ between kernels: (k + 2)·ε per term.
            let tol = eps * scale[j] + f64::MIN_POSITIVE;
            // NaN and infinities must be where the inputs put them; past the
            // type's range a result may be infinite.
            if !check::agrees_within(got, want, tol, limit) {
                let why = match want.is_finite() {
                    true => format!("|error| {:.3e} > {tol:.3e}", (got - want).abs()),
                    false => "its inputs make it non-finite".into(),
                };
                bail!(
                    "product {i} is wrong at ({}, {}): got {got}, expected {want} ({why})",
                    j / d.m,
                    j % d.m
                );
            }
            if want.is_finite() && got.is_finite() {
                worst = worst.max((got - want).abs());
            }
        }
    }
    Ok((kept.len(), worst))
}

#[cfg(test)]
mod size_tests {
    use super::*;
    use dls_protocol::Shape;

    /// C of a batch from the naive kernel, rounded to the batch's type.
    fn naive_c(batch: &Batch) -> Values {
        let c: Vec<f64> = (0..batch.count)
            .flat_map(|i| matrix::naive_dims(&batch.a_of(i).expect("A"), &batch.b_of(i).expect("B"), batch.dims()))
            .collect();
        match batch.form.dtype {
            DType::F64 => Values::F64(c),
            DType::F32 => Values::F32(c.iter().map(|&v| v as f32).collect()),
        }
    }

    /// What the shell keeps of `c` for the products `picks`.
    fn kept(batch: &Batch, c: &Values, picks: &[usize]) -> BTreeMap<usize, Vec<f64>> {
        picks
            .iter()
            .map(|&i| (i, c_of(c, &batch.form, i).into_owned()))
            .collect()
    }

    #[test]
    fn verify_passes_right_results_with_nan_and_infinities_and_fails_wrong_ones() {
        let (m, n) = (4, 6);
        let mut a = vec![0.0; m * n * n];
        let mut b = vec![0.0; m * n * n];
        matrix::fill_random(&mut a, 3);
        matrix::fill_random(&mut b, 4);
        a[2] = f64::NAN; // product 0, row 0
        b[n * n + 7] = f64::INFINITY; // product 1, column 1
        a[2 * n * n + 3] = f64::NEG_INFINITY;
        b[2 * n * n + 3 * n] = 0.0; // 0 · ∞ in product 2
        let batch = Batch::new(Form::square(n as u32), m, Values::F64(a), Values::F64(b)).expect("batch");
        let Values::F64(c) = naive_c(&batch) else {
            unreachable!("float64")
        };
        assert!(c.iter().any(|v| v.is_nan()) && c.iter().any(|v| v.is_infinite()));
        let right = Values::F64(c.clone());
        for seed in 0..4 {
            let k = kept(&batch, &right, &picks(m, m, seed));
            verify(&batch, &k).expect("right results with NaN pass");
        }
        let mut wrong = c.clone();
        wrong[n * n + 2] = 1.0; // product 1, column 2: finite and must stay so
        wrong[n * n + 1 + n] = 5.0; // product 1, column 1: must be non-finite
        let k = kept(&batch, &Values::F64(wrong.clone()), &picks(m, m, 0));
        let e = format!("{:#}", verify(&batch, &k).expect_err("wrong"));
        assert!(e.contains("product 1"), "{e}");
        // References worked out ahead (all, or some: the others are worked
        // out when checked) make the same check.
        let all: Vec<usize> = (0..m).collect();
        let k = kept(&batch, &right, &all);
        let ahead = verify_with(&batch, &k, references(&batch, &all)).expect("right results pass");
        assert_eq!(ahead.0, m);
        assert_eq!(ahead.1.to_bits(), verify(&batch, &k).expect("pass").1.to_bits());
        let k = kept(&batch, &Values::F64(wrong), &all);
        for some in [&all[..0], &all[..1], &all[..]] {
            let e = format!(
                "{:#}",
                verify_with(&batch, &k, references(&batch, some)).expect_err("wrong")
            );
            assert!(e.contains("product 1"), "{e}");
        }
        // The picks are the seed's, sorted, within the batch.
        assert_eq!(picks(10, 3, 7), picks(10, 3, 7));
        assert!(picks(10, 30, 7).windows(2).all(|w| w[0] < w[1]) && picks(10, 30, 7).len() == 10);
    }

    #[test]
    fn verify_holds_rectangular_float32_and_shared_b_to_their_rounding() {
        let shape = Shape { n: 5, k: 40, m: 3 };
        for (dtype, shared_b) in [(DType::F32, false), (DType::F32, true), (DType::F64, true)] {
            let form = Form { shape, dtype, shared_b };
            let batch = Batch::random_form(form, 6, 3).expect("memory");
            let c = naive_c(&batch);
            let all: Vec<usize> = (0..6).collect();
            assert_eq!(verify(&batch, &kept(&batch, &c, &all)).expect("right").0, 6);
            // One entry off by 0.05: the allowance here is about
            // 4·42·ε·Σ|a||b| ≤ 2e-4 in float32 (|entries| < 1, k = 40).
            let mut wrong = c.clone();
            let (i, v) = (2 * 15 + 4, c.get(2 * 15 + 4));
            let changed = v + 0.05;
            match &mut wrong {
                Values::F32(w) => w[i] = changed as f32,
                Values::F64(w) => w[i] = changed,
            }
            let e = format!("{:#}", verify(&batch, &kept(&batch, &wrong, &all)).expect_err("wrong"));
            assert!(e.contains("product 2 is wrong at (1, 1)"), "{form}: {e}");
        }
    }

    #[test]
    fn batches_whose_matrices_disagree_with_the_form_are_refused_by_name() {
        let form = Form {
            shape: Shape { n: 2, k: 3, m: 4 },
            dtype: DType::F32,
            shared_b: false,
        };
        let e = Batch::new(form, 2, Values::F32(vec![0.0; 12]), Values::F32(vec![0.0; 23]))
            .expect_err("short B")
            .to_string();
        assert!(e.contains("B holds 23 values, not the 2 × 12"), "{e}");
        let e = Batch::new(form, 2, Values::F64(vec![0.0; 12]), Values::F32(vec![0.0; 24]))
            .expect_err("wrong type")
            .to_string();
        assert!(e.contains("A holds float64 values, not float32"), "{e}");
        let shared = Form { shared_b: true, ..form };
        Batch::new(shared, 2, Values::F32(vec![0.0; 12]), Values::F32(vec![0.0; 12])).expect("one B");
    }

    #[test]
    fn a_random_batch_is_made_as_it_is_read() {
        use crate::runtime::data::External;
        let form = Form {
            shared_b: false,
            ..Form::square(5)
        };
        let batch = Batch::random_form(form, 7, 11).expect("countable");
        // Product 3's A is values 75..100 of A's stream, its B those of
        // B's own stream (seeds 2s+1 and 2s+2), read twice the same.
        let (a, b) = (
            RandomValues::new(DType::F64, 175, 23),
            RandomValues::new(DType::F64, 175, 24),
        );
        let want_a: Vec<f64> = (75..100).map(|i| a.at(i)).collect();
        let want_b: Vec<f64> = (75..100).map(|i| b.at(i)).collect();
        assert_eq!(batch.a_of(3).expect("A"), want_a);
        assert_eq!(batch.b_of(3).expect("B"), want_b);
        assert_eq!(batch.a_of(3).expect("A"), batch.a_of(3).expect("A"));
        assert_ne!(want_a, want_b);
        assert_eq!(a.len(), batch.a.len());
        // float32: the same draws, rounded.
        let single = Form {
            dtype: DType::F32,
            ..form
        };
        let b32 = Batch::random_form(single, 7, 11).expect("countable");
        let got = b32.a_of(3).expect("A");
        assert!(got.iter().zip(&want_a).all(|(x, y)| *x == f64::from(*y as f32)));
        // More values than can be counted: one clear error, nothing made.
        let e = Batch::random_form(Form::square(1), usize::MAX, 0).expect_err("too many");
        assert!(e.to_string().contains("more values than can be counted"), "{e}");
    }

    #[test]
    fn batches_the_master_cannot_hold_are_refused_by_name() {
        // 10 products of 100×100: 3 · 10 · 10⁴ · 8 = 2.4 MB.
        let f = Form::square(100);
        assert_eq!(master_bytes(10, &f), Some(2_400_000));
        // float32, one shared B: 10 · (A + C) + B = 10 · 2 · 4 · 10⁴ + 4 · 10⁴.
        let shared = Form {
            dtype: DType::F32,
            shared_b: true,
            ..f
        };
        assert_eq!(master_bytes(10, &shared), Some(840_000));
        check_fits(10, &f, true, Some(2_400_000), "x").expect("fits exactly");
        // Streaming C to a file: A and B only.
        check_fits(10, &f, false, Some(1_600_000), "x").expect("fits exactly");
        let e = check_fits(10, &f, true, Some(2_399_999), "--batch 10 --size 100")
            .expect_err("too big")
            .to_string();
        assert!(
            e.starts_with("--batch 10 --size 100:")
                && e.contains("10 products of 100×100 float64 need 2.4 MB")
                && e.contains("the 2.4 MB"),
            "{e}"
        );
        let e = check_fits(usize::MAX, &Form::square(1), true, None, "--batch")
            .expect_err("overflows")
            .to_string();
        assert!(e.contains("more values than can be counted"), "{e}");
        check_fits(
            usize::MAX / 2,
            &Form::square(0),
            true,
            None,
            "empty matrices overflow nothing",
        )
        .expect("fits");
    }
}
