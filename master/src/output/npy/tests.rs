use super::*;

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("dls-npy-{}-{name}", std::process::id()))
}

/// Magic, version 1 and `header` padded as numpy pads it.
fn head(header: &str) -> Vec<u8> {
    framed(header)
}

fn raw(path: &Path, header: &str, bytes: usize) {
    let mut out = head(header);
    out.extend(vec![0u8; bytes]);
    std::fs::write(path, out).expect("writes");
}

/// The value the test files hold at element (i, r, c): exact in float32.
fn value(i: usize, r: usize, c: usize) -> f64 {
    (100 * i + 10 * r + c) as f64 + 0.5
}

/// A file of shape (m, rows, cols) (or (rows, cols) when `m` is `None`)
/// whose element (i, r, c) is [`value`], laid out as `descr` and `fortran`
/// say, written byte by byte here.
fn laid_out(path: &Path, m: Option<usize>, rows: usize, cols: usize, descr: &str, fortran: bool) {
    let shape = match m {
        Some(m) => format!("({m}, {rows}, {cols})"),
        None => format!("({rows}, {cols})"),
    };
    let mut bytes = head(&format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    ));
    let mm = m.unwrap_or(1);
    // Fortran order: the first index varies fastest.
    let mut order = Vec::new();
    if fortran {
        for c in 0..cols {
            for r in 0..rows {
                for i in 0..mm {
                    order.push((i, r, c));
                }
            }
        }
    } else {
        for i in 0..mm {
            for r in 0..rows {
                for c in 0..cols {
                    order.push((i, r, c));
                }
            }
        }
    }
    let big = descr.starts_with('>');
    for (i, r, c) in order {
        let v = value(i, r, c);
        match (&descr[1..], big) {
            ("f8", true) => bytes.extend(v.to_be_bytes()),
            ("f8", false) => bytes.extend(v.to_le_bytes()),
            (_, true) => bytes.extend((v as f32).to_be_bytes()),
            (_, false) => bytes.extend((v as f32).to_le_bytes()),
        }
    }
    std::fs::write(path, bytes).expect("writes");
}

#[test]
fn every_layout_of_both_types_is_converted_on_reading() {
    for (m, rows, cols) in [(Some(3), 4, 4), (Some(2), 3, 5), (None, 4, 2)] {
        let want: Vec<f64> = (0..m.unwrap_or(1))
            .flat_map(|i| (0..rows).flat_map(move |r| (0..cols).map(move |c| value(i, r, c))))
            .collect();
        for descr in ["<f8", ">f8", "<f4", ">f4"] {
            for fortran in [false, true] {
                let endian = if descr.starts_with('>') { "be" } else { "le" };
                let p = tmp(&format!("layout-{endian}{}-{fortran}-{rows}x{cols}.npy", &descr[1..]));
                laid_out(&p, m, rows, cols, descr, fortran);
                let got = read(&p).unwrap_or_else(|e| panic!("{descr} fortran={fortran}: {e:#}"));
                assert_eq!((got.count, got.rows, got.cols), (m, rows, cols));
                let dtype = if descr.ends_with("f4") { DType::F32 } else { DType::F64 };
                assert_eq!(got.data.dtype(), dtype);
                let values: Vec<f64> = got.data.to_f64(0..got.data.len()).into_owned();
                assert_eq!(values, want, "{descr} fortran={fortran} {m:?}×{rows}×{cols}");
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// A and B as files of `shape_a` and `shape_b` ((M, r, c) or (r, c)).
fn pair(
    name: &str,
    a: (Option<usize>, usize, usize),
    b: (Option<usize>, usize, usize),
    descr_b: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (pa, pb) = (tmp(&format!("{name}-a.npy")), tmp(&format!("{name}-b.npy")));
    laid_out(&pa, a.0, a.1, a.2, "<f8", false);
    laid_out(&pb, b.0, b.1, b.2, descr_b, false);
    (pa, pb)
}

#[test]
fn a_batch_of_rectangular_or_shared_b_products_is_read_with_its_form() {
    let (a, b) = pair("rect", (Some(3), 2, 5), (Some(3), 5, 4), "<f8");
    let batch = read_batch(&a, &b, &Expect::default(), false).expect("pairs up");
    assert_eq!((batch.form.shape, batch.count), (Shape { n: 2, k: 5, m: 4 }, 3));
    assert!(!batch.form.shared_b);
    // C-ordered files are read where the values lie, chunk by chunk.
    assert!(matches!((&batch.a, &batch.b), (Source::File(_), Source::File(_))));
    assert_eq!(batch.b_of(2).expect("B").first(), Some(&value(2, 0, 0)));
    assert_eq!(batch.a_of(1).expect("A")[7], value(1, 1, 2));
    let chunk = batch.read_chunk(&[0, 2]).expect("reads");
    assert_eq!(chunk.a_of(1)[0], value(2, 0, 0));
    let (a, b) = pair("shared", (Some(3), 2, 5), (None, 5, 4), "<f8");
    let batch = read_batch(&a, &b, &Expect::default(), false).expect("one B");
    assert!(batch.form.shared_b);
    assert!(matches!(batch.b, Source::Memory(_)), "a shared B is held");
    assert_eq!(batch.b_of(2).expect("B"), batch.b_of(0).expect("B"));
    let want = Expect {
        shape: Some(Shape { n: 2, k: 5, m: 4 }),
        dtype: Some(DType::F64),
        shared_b: true,
        shape_flag: Some("--shape"),
    };
    read_batch(&a, &b, &want, true).expect("what the flags say");
    for p in [a, b] {
        let _ = std::fs::remove_file(p);
    }
}

fn batch_fails(
    name: &str,
    a: (Option<usize>, usize, usize),
    b: (Option<usize>, usize, usize),
    descr_b: &str,
    want: &Expect,
    needles: &[&str],
) {
    let (pa, pb) = pair(name, a, b, descr_b);
    let e = format!("{:#}", read_batch(&pa, &pb, want, false).expect_err("must fail"));
    for n in needles {
        assert!(e.contains(n), "{e:?} should mention {n:?}");
    }
    let _ = (std::fs::remove_file(pa), std::fs::remove_file(pb));
}

#[test]
fn a_and_b_that_do_not_pair_up_name_both_files_and_the_dimension() {
    let any = Expect::default();
    let sq = (Some(2), 4, 4);
    batch_fails(
        "k",
        sq,
        (Some(2), 3, 3),
        "<f8",
        &any,
        &["k-a.npy", "k-b.npy", "B needs 4 rows", "4×4", "3×3"],
    );
    batch_fails(
        "count",
        sq,
        (Some(3), 4, 4),
        "<f8",
        &any,
        &["holds 2 matrices", "holds 3", "pair up"],
    );
    batch_fails("types", sq, sq, "<f4", &any, &["float64", "float32", "one type"]);
    batch_fails("a2", (None, 4, 4), sq, "<f8", &any, &["A is one 4×4 matrix"]);
    let shared = Expect { shared_b: true, ..any };
    batch_fails(
        "shared-flag",
        sq,
        sq,
        "<f8",
        &shared,
        &["--shared-b", "holds 2 matrices"],
    );
    let size = Expect {
        shape: Some(Shape::square(3)),
        shape_flag: Some("--size"),
        ..any
    };
    batch_fails("size", sq, sq, "<f8", &size, &["products of 4×4", "--size says 3×3"]);
    let dtype = Expect {
        dtype: Some(DType::F32),
        ..any
    };
    batch_fails(
        "dtype",
        sq,
        sq,
        "<f8",
        &dtype,
        &["float64 values but --dtype is float32"],
    );
}

#[test]
fn fortran_ordered_inputs_are_held_and_read_right() {
    let (pa, pb) = (tmp("fa.npy"), tmp("fb.npy"));
    laid_out(&pa, Some(2), 3, 4, ">f4", true);
    laid_out(&pb, Some(2), 4, 2, "<f4", false);
    let batch = read_batch(&pa, &pb, &Expect::default(), false).expect("pairs up");
    assert!(matches!((&batch.a, &batch.b), (Source::Memory(_), Source::File(_))));
    assert_eq!(batch.a_of(1).expect("A")[4 + 3], value(1, 1, 3));
    assert_eq!(batch.b_of(1).expect("B")[2 * 2 + 1], value(1, 2, 1));
    let _ = (std::fs::remove_file(pa), std::fs::remove_file(pb));
}

/// Results stored in any order land in their places; the file appears
/// under its name only once finished, and a writer dropped unfinished
/// leaves nothing behind.
#[test]
fn results_are_written_in_place_and_named_when_complete() {
    use crate::runtime::data::Sink;
    let dir = tmp("writer");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("c.npy");
    let form = Form {
        shape: Shape { n: 2, k: 7, m: 3 },
        dtype: DType::F32,
        shared_b: false,
    };
    let mut w = NpyWriter::create(&path, &form, 4).expect("creates");
    let chunk = Values::F32((0..12).map(|i| i as f32).collect());
    // Products 3 and 1 arrive in one chunk, then 0 and 2.
    w.store(3, &chunk, 0..6).expect("stores");
    w.store(1, &chunk, 6..12).expect("stores");
    assert!(!path.exists(), "no file under the final name before it is complete");
    // 0 and 2 as runs: one product, then a run cut short is refused.
    w.store_run(0, &chunk, 6..12, 6).expect("stores");
    w.store_run(2, &chunk, 0..6, 6).expect("stores");
    assert!(w.store(0, &chunk, 0..5).is_err(), "a result of the wrong size");
    assert!(
        w.store_run(0, &chunk, 0..9, 6).is_err(),
        "a run of one and a half results"
    );
    assert_eq!(w.finish().expect("finishes"), path);
    let got = read(&path).expect("reads");
    assert_eq!((got.count, got.rows, got.cols), (Some(4), 2, 3));
    let want: Vec<f32> = [6..12, 6..12, 0..6, 0..6]
        .into_iter()
        .flat_map(|r| r.map(|i| i as f32))
        .collect();
    assert_eq!(got.data, Values::F32(want));
    let other = dir.join("d.npy");
    drop(NpyWriter::create(&other, &form, 4).expect("creates"));
    assert_eq!(std::fs::read_dir(&dir).expect("lists").count(), 1, "only c.npy");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn roundtrip_in_both_types_and_ranks() {
    let p = tmp("rt.npy");
    for m in [
        Matrices {
            count: Some(3),
            rows: 2,
            cols: 2,
            data: Values::F64((0..12).map(|i| i as f64 * 0.25).collect()),
        },
        Matrices {
            count: Some(2),
            rows: 1,
            cols: 3,
            data: Values::F32((0..6).map(|i| i as f32 * 0.5).collect()),
        },
        Matrices {
            count: None,
            rows: 3,
            cols: 1,
            data: Values::F32(vec![1.0, -2.0, 3.5]),
        },
    ] {
        write(&p, &m).expect("writes");
        let bytes = std::fs::read(&p).expect("reads");
        let header_end = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!(header_end % 64, 0, "header padded to 64 bytes as numpy does");
        assert_eq!(read(&p).expect("reads"), m);
    }
    let _ = std::fs::remove_file(p);
}

fn fails(header: &str, bytes: usize, needle: &str) {
    let p = tmp(&format!("bad-{}.npy", needle.len()));
    raw(&p, header, bytes);
    let e = format!("{:#}", read(&p).expect_err("must fail"));
    let _ = std::fs::remove_file(&p);
    assert!(e.contains(needle), "{e:?} should mention {needle:?}");
}

#[test]
fn mismatches_are_named() {
    fails(
        "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2, 2), }",
        16,
        "neither float32 nor float64",
    );
    fails(
        "{'descr': '<f8', 'fortran_order': Maybe, 'shape': (1, 2, 2), }",
        32,
        "unreadable fortran_order",
    );
    fails(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (16,), }",
        128,
        "rank 1",
    );
    fails(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2, 2), }",
        40,
        "fewer values",
    );
    fails(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 2), }",
        40,
        "more bytes",
    );
    // float32 values are 4 bytes: 16 bytes are exactly a (1, 2, 2) array.
    fails(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 2), }",
        18,
        "more bytes",
    );
    // Shapes a header may claim, checked before anything is allocated:
    // far more than the file holds, and more than can be counted.
    fails(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2000000, 2560, 2560), }",
        32,
        "fewer values",
    );
    fails(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952, 1, 1), }",
        32,
        "too large",
    );
    fails(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 4294967296, 4294967296), }",
        32,
        "too large",
    );
    let p = tmp("junk.npy");
    std::fs::write(&p, b"hello world").expect("writes");
    assert!(format!("{:#}", read(&p).expect_err("fails")).contains("not a .npy"));
    let _ = std::fs::remove_file(p);
}
