//! The kernel against the naive product, in every form it computes.

use super::*;
use dls_protocol::DType;

fn check(n: usize, k: usize, threads: usize, isolated: bool) {
    let mut ab = vec![0.0; 2 * k * n * n];
    fill_random(&mut ab, (n * 31 + k) as u64);
    let mut kernel = Kernel::new(threads).expect("pool");
    if isolated {
        kernel = kernel.isolated();
    }
    let c = kernel.multiply_batch(&ab, n, k);
    let nn = n * n;
    for i in 0..k {
        let want = naive(&ab[i * nn..(i + 1) * nn], &ab[(k + i) * nn..(k + i + 1) * nn], n);
        for (x, y) in c[i * nn..(i + 1) * nn].iter().zip(&want) {
            assert!(
                (x - y).abs() <= 1e-12 * n as f64,
                "n={n} k={k} threads={threads}: {x} vs {y}"
            );
        }
    }
}

#[test]
fn matches_the_naive_product() {
    for (n, k) in [(1, 1), (2, 3), (7, 5), (16, 4), (33, 3), (64, 2), (300, 1)] {
        for threads in [1, 2, 3] {
            check(n, k, threads, false);
        }
        check(n, k, 1, true);
    }
}

#[test]
fn rectangular_layout_is_row_major() {
    // [[1, 2], [3, 4]] · [[5, 6], [7, 8]] = [[19, 22], [43, 50]]
    let c = Kernel::new(1)
        .expect("pool")
        .multiply_batch(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], 2, 1);
    assert_eq!(c, vec![19.0, 22.0, 43.0, 50.0]);
}

/// Every shape (thin, wide, k = 1, degenerate), type and sharing of B,
/// against the naive product in float64, within k·ε of the type.
#[test]
fn every_form_matches_the_naive_product() {
    let shapes = [
        (1, 1, 1),
        (3, 5, 2),
        (2, 7, 9),
        (17, 1, 4),
        (40, 33, 3),
        (5, 64, 70),
        (0, 3, 2),
        (3, 0, 2),
    ];
    for (n, k, m) in shapes {
        for dtype in [DType::F32, DType::F64] {
            for shared_b in [false, true] {
                let form = Form {
                    shape: dls_protocol::Shape { n, k, m },
                    dtype,
                    shared_b,
                };
                for threads in [1, 2] {
                    check_form(&form, 3, threads);
                }
            }
        }
    }
}

fn check_form(form: &Form, count: usize, threads: usize) {
    let d = Dims::of(form);
    let (inputs, shared) = random_inputs(form, count, 7).expect("memory");
    let c = Kernel::new(threads)
        .expect("pool")
        .multiply_form(form, count, &inputs, shared.as_ref(), 1)
        .expect("lengths agree");
    assert_eq!(c.dtype(), form.dtype);
    assert_eq!(c.len(), count * d.n * d.m);
    let x: Vec<f64> = inputs.to_f64(0..inputs.len()).into_owned();
    let (a_len, b_len, c_len) = (d.n * d.k, d.k * d.m, d.n * d.m);
    let shared: Option<Vec<f64>> = shared.map(|b| b.to_f64(0..b.len()).into_owned());
    for i in 0..count {
        let a = &x[i * a_len..(i + 1) * a_len];
        let b = match &shared {
            Some(b) => &b[..],
            None => &x[count * a_len + i * b_len..count * a_len + (i + 1) * b_len],
        };
        let want = naive_dims(a, b, d);
        // The rounding bound of a dot product of length k: k·ε·Σ|a||b|.
        let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
        let scale = naive_dims(&abs(a), &abs(b), d);
        for (j, y) in want.iter().enumerate() {
            let got = c.get(i * c_len + j);
            let tol = (d.k as f64 + 2.0) * form.dtype.epsilon() * scale[j];
            assert!((got - y).abs() <= tol, "{form} product {i} entry {j}: {got} vs {y}");
        }
    }
}

#[test]
fn a_chunk_that_disagrees_with_its_form_is_refused() {
    let kernel = Kernel::new(1).expect("pool");
    let form = Form::square(2);
    let e = kernel
        .multiply_form(&form, 1, &Values::F64(vec![0.0; 7]), None, 1)
        .expect_err("short");
    assert!(e.contains("7 float64 values"), "{e}");
    let f32_form = Form {
        dtype: DType::F32,
        ..form
    };
    assert!(kernel
        .multiply_form(&f32_form, 1, &Values::F64(vec![0.0; 8]), None, 1)
        .is_err());
    let shared = Form { shared_b: true, ..form };
    assert!(kernel
        .multiply_form(&shared, 1, &Values::F64(vec![0.0; 4]), None, 1)
        .is_err());
    assert!(kernel
        .multiply_form(
            &shared,
            1,
            &Values::F64(vec![0.0; 4]),
            Some(&Values::F64(vec![0.0; 3])),
            1
        )
        .is_err());
}

#[test]
fn empty_batches() {
    let kernel = Kernel::new(2).expect("pool");
    assert!(kernel.multiply_batch(&[], 4, 0).is_empty());
    assert!(kernel.multiply_batch(&[], 0, 3).is_empty());
}

/// One product cut across threads, by rows (tall C) and by columns (wide
/// C), at sizes whose cut falls inside a block and at its edge.
#[test]
fn one_product_cut_across_threads_matches_the_naive_product() {
    let shapes = [(70, 33, 40), (40, 9, 100), (33, 300, 32), (96, 5, 17), (300, 300, 300)];
    for (n, k, m) in shapes {
        for dtype in [DType::F32, DType::F64] {
            let form = Form {
                shape: dls_protocol::Shape { n, k, m },
                dtype,
                shared_b: false,
            };
            for threads in [2, 3, 4] {
                check_form(&form, 1, threads);
            }
        }
    }
}

/// Panels of a large product added into one piece of C (the first
/// setting it, whatever it held), on one thread
/// and cut across several, a slowed worker's extra rounds (more rows
/// than its scratch holds) changing nothing, against the naive sum of
/// their products.
#[test]
fn panels_add_into_the_piece() {
    for (n, k, m) in [(5, 3, 4), (70, 20, 50), (40, 16, 120), (300, 8, 20)] {
        for dtype in [DType::F32, DType::F64] {
            let form = Form {
                shape: dls_protocol::Shape { n, k, m },
                dtype,
                shared_b: false,
            };
            let d = Dims::of(&form);
            for threads in [1, 2, 3] {
                let kernel = Kernel::new(threads).expect("pool");
                // What the piece's C held before its first panel is not read.
                let len = n as usize * m as usize;
                let mut acc = match dtype {
                    DType::F32 => Values::F32(vec![7.0; len]),
                    DType::F64 => Values::F64(vec![7.0; len]),
                };
                let mut want = vec![0.0; d.n * d.m];
                let mut scale = vec![0.0; d.n * d.m];
                for seed in [1, 2] {
                    let (panel, _) = random_inputs(&form, 1, seed).expect("memory");
                    let repeat = if seed == 2 { 3 } else { 1 };
                    kernel
                        .add_panel(&form, &panel, &mut acc, seed == 1, repeat)
                        .expect("lengths agree");
                    let x = panel.to_f64(0..panel.len()).into_owned();
                    let (a, b) = x.split_at(d.n * d.k);
                    let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
                    let part = naive_dims(a, b, d);
                    let size = naive_dims(&abs(a), &abs(b), d);
                    for j in 0..want.len() {
                        want[j] += part[j];
                        scale[j] += size[j];
                    }
                }
                for (j, y) in want.iter().enumerate() {
                    let got = acc.get(j);
                    let tol = (2.0 * d.k as f64 + 2.0) * dtype.epsilon() * scale[j];
                    assert!(
                        (got - y).abs() <= tol,
                        "{form}, {threads} threads, entry {j}: {got} vs {y}"
                    );
                }
            }
        }
    }
}

/// A spare buffer holding other values (NaN here) takes a chunk's
/// results: every one is written, none read; an empty sum is zero.
#[test]
fn results_in_a_spare_buffer_are_the_products_alone() {
    for threads in [1, 2] {
        let kernel = Kernel::new(threads).expect("pool");
        for (n, k, m) in [(9, 7, 5), (40, 3, 70), (6, 0, 4)] {
            let form = Form {
                shape: dls_protocol::Shape { n, k, m },
                dtype: DType::F64,
                shared_b: false,
            };
            kernel.recycle(Values::F64(vec![f64::NAN; 4 * 40 * 70]));
            let (inputs, _) = random_inputs(&form, 3, 11).expect("memory");
            let c = kernel.multiply_form(&form, 3, &inputs, None, 1).expect("lengths agree");
            let d = Dims::of(&form);
            let x = inputs.to_f64(0..inputs.len()).into_owned();
            let (a_len, b_len, c_len) = (d.n * d.k, d.k * d.m, d.n * d.m);
            for i in 0..3 {
                let a = &x[i * a_len..(i + 1) * a_len];
                let b = &x[3 * a_len + i * b_len..3 * a_len + (i + 1) * b_len];
                let want = naive_dims(a, b, d);
                for (j, y) in want.iter().enumerate() {
                    let got = c.get(i * c_len + j);
                    assert!(
                        (got - y).abs() <= 1e-12 * (1.0 + y.abs()),
                        "{form} product {i} entry {j}: {got} vs {y}"
                    );
                }
            }
            kernel.recycle(c);
        }
    }
}
