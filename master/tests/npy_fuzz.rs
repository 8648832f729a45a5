//! The `.npy` header parser under random and mutated input: never a panic,
//! and a layout only when the file holds exactly what its shape says
//! (recomputed here from the shape). `master/fuzz/` runs the same property
//! under cargo fuzz.

use dls_master::output::npy::layout;
use proptest::prelude::*;

/// A version 1 header for `shape`, padded as numpy pads it.
fn file_head(shape: &str) -> Vec<u8> {
    let mut h = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    let total = 10 + h.len() + 1;
    h.push_str(&" ".repeat((64 - total % 64) % 64));
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((h.len() as u16).to_le_bytes());
    bytes.extend(h.as_bytes());
    bytes
}

/// What a layout must satisfy: the file is the prefix plus exactly
/// M·rows·cols values of its type.
fn consistent(head: &[u8], file_len: u64) -> Result<(), TestCaseError> {
    if let Ok(l) = layout(head, file_len, "f.npy") {
        let values = (l.count.unwrap_or(1) as u128) * (l.rows as u128) * (l.cols as u128);
        prop_assert_eq!(l.prefix as u128 + l.dtype.size() as u128 * values, file_len as u128);
        prop_assert!(l.prefix as usize <= head.len());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn any_bytes(head in proptest::collection::vec(any::<u8>(), 0..400), file_len in any::<u64>()) {
        consistent(&head, file_len)?;
    }

    #[test]
    fn mutated_headers(
        dims in proptest::collection::vec(0u64..u64::MAX, 0..5),
        small in proptest::collection::vec(0usize..40, 3),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
        extra in 0u64..64,
        big in any::<bool>(),
    ) {
        let shape = if big {
            format!("({})", dims.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
        } else {
            format!("({}, {}, {})", small[0], small[1], small[2])
        };
        let mut head = file_head(&shape);
        for (at, b) in &edits {
            let i = at.index(head.len());
            head[i] = *b;
        }
        let exact = head.len() as u64 + 8 * (small[0] * small[1] * small[2]) as u64;
        for file_len in [exact, exact + extra, exact.saturating_sub(extra), u64::MAX] {
            consistent(&head, file_len)?;
            consistent(&head[..cut.index(head.len() + 1)], file_len)?;
        }
    }

    #[test]
    fn valid_headers_are_read_exactly(m in 0usize..50, r in 0usize..50, c in 0usize..50, extra in 1u64..16) {
        let head = file_head(&format!("({m}, {r}, {c})"));
        let exact = head.len() as u64 + 8 * (m * r * c) as u64;
        let l = layout(&head, exact, "f.npy").map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
        prop_assert_eq!((l.count, l.rows, l.cols, l.prefix), (Some(m), r, c, head.len() as u64));
        prop_assert!(layout(&head, exact + extra, "f.npy").is_err());
        if exact >= head.len() as u64 + extra && m * r * c > 0 {
            prop_assert!(layout(&head, exact - extra, "f.npy").is_err());
        }
    }
}

/// The cargo fuzz target's property over its committed corpus, and every
/// prefix of each entry, so it cannot rot between fuzzing runs.
#[test]
fn fuzz_corpus_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/npy_header");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus directory exists") {
        let data = std::fs::read(entry.expect("entry").path()).expect("readable");
        let Some((len, head)) = data.split_first_chunk::<8>() else {
            continue;
        };
        let file_len = u64::from_le_bytes(*len);
        for cut in 0..=head.len() {
            consistent(&head[..cut], file_len).expect("consistent");
        }
        seen += 1;
    }
    assert!(seen >= 4, "corpus has only {seen} seeds");
}
