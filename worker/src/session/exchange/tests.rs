//! Panels put together from parts against the panels cut straight from A
//! and B: every stage of a rectangle in bands, its row parts in shuffled
//! order; parts that are not due refused.

use super::*;

/// A (n × k) and B (k × m) with distinct values: A[i][j] = i·1000 + j,
/// B[i][j] = −(i·1000 + j).
fn a_at(i: u32, j: u32) -> f64 {
    (i * 1000 + j) as f64
}
fn b_at(i: u32, j: u32) -> f64 {
    -((i * 1000 + j) as f64)
}

/// Rows `r` of A over k `k0..k0 + d`, row-major.
fn a_part(r: Span, k0: u32, d: u32) -> Values {
    Values::F64(
        (r.start..r.end())
            .flat_map(|i| (k0..k0 + d).map(move |j| a_at(i, j)))
            .collect(),
    )
}

/// B's columns `c` over k `k0..k0 + d`: d rows of the span's width.
fn b_part(c: Span, k0: u32, d: u32) -> Values {
    Values::F64(
        (k0..k0 + d)
            .flat_map(|i| (c.start..c.end()).map(move |j| b_at(i, j)))
            .collect(),
    )
}

fn assembly(rows: Span, bands: &[Span], steps: &[u32]) -> Assembly {
    Assembly {
        dtype: DType::F64,
        rows,
        bands: bands.iter().enumerate().map(|(i, &b)| (b, ChunkId(i as u64))).collect(),
        steps: steps.to_vec(),
        peers: Vec::new(),
        kept: vec![None; steps.len()],
        open: HashMap::new(),
        kept_bytes: 0,
        next: 0,
    }
}

/// Place a part; the next whole panel's inputs, if any.
fn put(x: &mut Assembly, stage: u32, part: SharePart, values: Values) -> Option<Values> {
    x.place(stage, part, values).expect("a part due");
    x.next_whole().expect("puts together").map(|(s, v)| {
        assert_eq!(s, stage);
        v
    })
}

fn span(start: u32, len: u32) -> Span {
    Span { start, len }
}

#[test]
fn panels_put_together_are_the_panels_cut_from_a_and_b() {
    let rows = span(3, 7);
    let bands = [span(10, 2), span(12, 3), span(15, 2)];
    let steps = [2, 3, 1];
    // Row parts of the first band: three groups, sent in this order.
    let groups = [span(6, 4), span(3, 1), span(4, 2)];
    let mut x = assembly(rows, &bands, &steps);
    let mut k0 = vec![0u32];
    for d in steps {
        k0.push(k0.last().expect("holds") + d);
    }
    for (band, &cols) in bands.iter().enumerate() {
        for (step, &d) in steps.iter().enumerate() {
            let stage = (band * steps.len() + step) as u32;
            let mut got = None;
            if band == 0 {
                // B first, then the rows: the panel is whole at the last.
                assert!(put(&mut x, stage, SharePart::Cols(cols), b_part(cols, k0[step], d)).is_none());
                for (i, &g) in groups.iter().enumerate() {
                    let r = put(&mut x, stage, SharePart::Rows(g), a_part(g, k0[step], d));
                    assert_eq!(r.is_some(), i + 1 == groups.len(), "band 0 step {step} part {i}");
                    got = got.or(r);
                }
            } else {
                got = put(&mut x, stage, SharePart::Cols(cols), b_part(cols, k0[step], d));
            }
            let mut want = a_part(rows, k0[step], d);
            let b = b_part(cols, k0[step], d);
            let at = want.len();
            want.resize(at + b.len());
            want.copy_in(at, &b).expect("holds");
            assert_eq!(got, Some(want), "band {band} step {step}");
        }
    }
    assert!(x.kept.iter().all(Option::is_none), "the last band takes the rows kept");
    assert!(x.open.is_empty());
}

/// A later band's part that comes before its step's rows waits for them;
/// panels go on in stage order.
#[test]
fn panels_go_on_in_stage_order() {
    let rows = span(0, 2);
    let bands = [span(0, 1), span(1, 1)];
    let mut x = assembly(rows, &bands, &[1, 1]);
    // Stages 2 and 3 (the second band) first: nothing whole.
    for (stage, k0) in [(3, 1), (2, 0)] {
        assert!(put(&mut x, stage, SharePart::Cols(bands[1]), b_part(bands[1], k0, 1)).is_none());
    }
    // Stage 1 whole, but stage 0 is not: it waits.
    x.place(1, SharePart::Rows(rows), a_part(rows, 1, 1)).expect("holds");
    x.place(1, SharePart::Cols(bands[0]), b_part(bands[0], 1, 1))
        .expect("holds");
    assert!(x.next_whole().expect("holds").is_none());
    x.place(0, SharePart::Rows(rows), a_part(rows, 0, 1)).expect("holds");
    x.place(0, SharePart::Cols(bands[0]), b_part(bands[0], 0, 1))
        .expect("holds");
    let order: Vec<u32> = std::iter::from_fn(|| x.next_whole().expect("holds").map(|(s, _)| s)).collect();
    assert_eq!(order, vec![0, 1, 2, 3]);
}

#[test]
fn parts_not_due_are_refused() {
    let rows = span(0, 4);
    let bands = [span(0, 2), span(2, 2)];
    let mut x = assembly(rows, &bands, &[2]);
    let cases: Vec<(u32, SharePart, Values, &str)> = vec![
        (2, SharePart::Cols(span(0, 2)), b_part(span(0, 2), 0, 2), "stage beyond"),
        (
            0,
            SharePart::Cols(span(2, 2)),
            b_part(span(2, 2), 0, 2),
            "another band's columns",
        ),
        (0, SharePart::Rows(span(3, 2)), a_part(span(3, 2), 0, 2), "rows outside"),
        (
            1,
            SharePart::Rows(span(0, 2)),
            a_part(span(0, 2), 0, 2),
            "rows after the first band",
        ),
        (
            0,
            SharePart::Rows(span(0, 2)),
            a_part(span(0, 1), 0, 2),
            "short payload",
        ),
    ];
    for (stage, part, values, what) in cases {
        assert!(x.place(stage, part, values).is_err(), "{what}");
    }
    x.place(0, SharePart::Rows(span(0, 2)), a_part(span(0, 2), 0, 2))
        .expect("holds");
    assert!(
        x.place(0, SharePart::Rows(span(1, 2)), a_part(span(1, 2), 0, 2))
            .is_err(),
        "rows twice"
    );
    x.place(0, SharePart::Cols(span(0, 2)), b_part(span(0, 2), 0, 2))
        .expect("holds");
    assert!(
        x.place(0, SharePart::Cols(span(0, 2)), b_part(span(0, 2), 0, 2))
            .is_err(),
        "columns twice"
    );
}
